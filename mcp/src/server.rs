//! `droidwarden mcp`: the phones as an MCP server, over stdio or (inside
//! the daemon) Streamable HTTP.
//!
//! The phones are a [`PhoneApi`]: the running daemon over D-Bus
//! (`droidwarden mcp`: every call goes through the hub, shows in the
//! status topics and passes the approval gate, `CallChecked`), the
//! daemon's own hub (the HTTP endpoint), or, with `--local`, the adb
//! server straight from this process (no approvals there: an action above
//! the threshold is refused with a message that says why).
//!
//! The daemon's skills are offered as prompts (`prompts.rs`).
//!
//! Catalogue and validation errors come back as tool results with
//! `isError: true` and the structured error (`{"error": {code, message,
//! retryable}}`); only requests that cannot be routed at all are JSON-RPC
//! errors, which the SDK answers with the spec's codes.

use super::tools::{LIST_DEVICES, McpTools};
use droidwarden_agent::skills::SkillSet;
use droidwarden_agent::tools::{Planned, ToolMode, ToolSchemas};
use droidwarden_core::phones::PhoneApi;
use droidwarden_services::{ErrorCode, WireError};
use rmcp::ErrorData as McpError;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often subscribed device states are read for changes.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// How often the phones are read for `notifications/tools/list_changed`
/// (the tools' `device` enum and services follow them).
const DEVICES_EVERY: Duration = Duration::from_secs(3);
/// How often a waiting call reports progress (when the client asked).
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// Resource URIs: `droidwarden://devices/<name>/state`.
const RESOURCE_PREFIX: &str = "droidwarden://devices/";
const RESOURCE_SUFFIX: &str = "/state";

/// How long the tools (for planning a call) are reused before the devices
/// are asked again; `tools/list` always asks.
const CACHE_FOR: Duration = Duration::from_secs(2);

/// The MCP server: the handler the SDK drives.
#[derive(Debug, Clone)]
pub struct PhoneServer {
    backend: Arc<dyn PhoneApi>,
    mode: ToolMode,
    /// How much of the schemas the tools carry.
    schemas: ToolSchemas,
    /// The tools as last built, and when: calls reuse them for
    /// [`CACHE_FOR`].
    cached: Arc<Mutex<Option<(Instant, McpTools)>>>,
    /// The skills offered as prompts.
    skills: Arc<SkillSet>,
    /// Where per-connection tasks are spawned and when they stop: the
    /// daemon's tracker and shutdown (HTTP), or this process's runtime
    /// (stdio, which ends with its one connection).
    tasks: Option<(
        tokio_util::task::TaskTracker,
        tokio_util::sync::CancellationToken,
    )>,
    /// The person whose client may answer approvals itself
    /// (elicitation), as the daemon knows them; `None`: approvals are
    /// never asked in the client (`[mcp] elicitation` off, or nobody
    /// vouches for who the client is: a tokenless HTTP endpoint).
    elicitor: Option<String>,
    /// Calls whose approval a 2026-07-28 client is asked for, until its
    /// retry (`elicit.rs`).
    pending: Arc<super::elicit::Pending>,
    /// This connection's `resources/subscribe` subscriptions (protocol
    /// 2025-11-25 and earlier; `subscribe.rs`).
    subscriptions: Arc<super::subscribe::Subscriptions>,
}

/// A device call's outcome: done, or the client is asked first.
enum Step {
    Done(Value),
    Ask(rmcp::model::InputRequiredResult),
}

impl PhoneServer {
    /// The same server, its tools carrying `schemas`.
    pub fn with_schemas(mut self, schemas: ToolSchemas) -> Self {
        self.schemas = schemas;
        self
    }

    /// A server over `backend`, offering tools in `mode`.
    pub fn new(backend: Arc<dyn PhoneApi>, mode: ToolMode) -> Self {
        Self {
            backend,
            mode,
            schemas: ToolSchemas::Index,
            cached: Arc::default(),
            skills: Arc::new(SkillSet::builtin()),
            tasks: None,
            elicitor: None,
            pending: Arc::default(),
            subscriptions: Arc::default(),
        }
    }

    /// Ask approvals in the client when it can elicit, on behalf of
    /// `elicitor` — the person the client is known to be (the local user
    /// running `droidwarden mcp`, the owner of the HTTP endpoint's token);
    /// `None` never asks there. 2026-07-28 calls wait for their retry in
    /// `pending` (shared by every session of an endpoint). `critical`
    /// actions are never asked in the client (`elicit::may_elicit`).
    pub fn with_elicitation(
        mut self,
        elicitor: Option<String>,
        pending: Arc<super::elicit::Pending>,
    ) -> Self {
        self.elicitor = elicitor;
        self.pending = pending;
        self
    }

    /// Spawn per-connection tasks on `tracker`, stopping at `shutdown`.
    pub fn with_tasks(
        mut self,
        tracker: tokio_util::task::TaskTracker,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> Self {
        self.tasks = Some((tracker, shutdown));
        self
    }

    /// Offer these skills as prompts (default: the built-in ones).
    pub fn with_skills(mut self, skills: Arc<SkillSet>) -> Self {
        self.skills = skills;
        self
    }

    /// The state of the device the resource `uri` names; `unknown()` for
    /// a URI that names no device, or a device without a state.
    async fn resource_state(
        &self,
        uri: &str,
        unknown: impl Fn() -> McpError,
    ) -> Result<Value, McpError> {
        let name = device_of(uri).ok_or_else(&unknown)?;
        self.backend
            .device_state(name)
            .await
            .map_err(|e| McpError::internal_error(e.message.clone(), None))?
            .ok_or_else(unknown)
    }

    /// What the tool list depends on: each phone's name and services
    /// (`None`: not readable now).
    async fn tools_key(&self) -> Option<Vec<(String, Vec<String>)>> {
        let mut key: Vec<_> = self
            .backend
            .summaries()
            .await
            .ok()?
            .into_iter()
            .map(|d| (d.name, d.services))
            .collect();
        key.sort();
        Some(key)
    }

    /// Tell a client of a protocol version before 2026-07-28 (which takes
    /// unscoped notifications) when the phones, and so the tools and
    /// resources, change; until its connection closes.
    async fn announce_changes(
        self,
        peer: rmcp::service::Peer<RoleServer>,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        let mut last = self.tools_key().await;
        let mut tick = tokio::time::interval(DEVICES_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if peer.is_transport_closed() {
                return;
            }
            let now = self.tools_key().await;
            if now.is_none() || now == last {
                continue;
            }
            last = now;
            if peer.notify_tool_list_changed().await.is_err()
                || peer.notify_resource_list_changed().await.is_err()
            {
                return;
            }
        }
    }

    /// A watched state as it is now (`None`: not readable now).
    pub(super) async fn watched_state(&self, uri: &str) -> Option<Value> {
        let name = device_of(uri)?;
        self.backend.device_state(name).await.ok().flatten()
    }

    /// The tools for the devices there are now.
    async fn tools(&self) -> Result<McpTools, WireError> {
        let tools = McpTools::new(self.mode, self.schemas, &self.backend.summaries().await?);
        if let Ok(mut cached) = self.cached.lock() {
            *cached = Some((Instant::now(), tools.clone()));
        }
        Ok(tools)
    }

    /// The tools as built at most [`CACHE_FOR`] ago, else anew.
    async fn recent_tools(&self) -> Result<McpTools, WireError> {
        let recent = self.cached.lock().ok().and_then(|c| {
            c.as_ref()
                .filter(|(at, _)| at.elapsed() < CACHE_FOR)
                .map(|(_, tools)| tools.clone())
        });
        match recent {
            Some(tools) => Ok(tools),
            None => self.tools().await,
        }
    }

    async fn run_tool(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Step, WireError> {
        let name = request.name.as_ref();
        let arguments = request.arguments.clone().unwrap_or_default();
        if name == LIST_DEVICES {
            if !arguments.is_empty() {
                return Err(WireError::new(
                    ErrorCode::InvalidParams,
                    "list_devices takes no arguments",
                ));
            }
            let devices = self.backend.summaries().await?;
            return Ok(Step::Done(json!({ "devices": devices })));
        }
        let tools = self.recent_tools().await?;
        let planned = tools.plan(name, &arguments)?;
        // describe_action reads the catalogue: no phone, no policy.
        if let d @ Planned::Describe { .. } = &planned
            && let Some(result) = d.run_local(0)
        {
            return result.map(Step::Done);
        }
        let Planned::Device { device, call, .. } = planned else {
            return Err(WireError::new(
                ErrorCode::InvalidRequest,
                format!("{name} is not a device tool"),
            ));
        };
        let command = call.0;
        let service = command.service_id();
        let action = command.action_name();
        let mode = match &self.elicitor {
            Some(_) if super::elicit::may_elicit(&command) && self.backend.may_ask(&command) => {
                super::elicit::mode(context)
            }
            _ => None,
        };
        let Some(mode) = mode else {
            let run = self.backend.call(device.as_deref(), command, None);
            let result = with_progress(run, context).await?;
            return Ok(Step::Done(wrap(device, service, action, result)));
        };
        // The call runs on its own task, so that it can outlive this
        // request when a 2026-07-28 client is asked (its retry collects it).
        let question = super::elicit::Question {
            approval_id: String::new(),
            device: device.clone(),
            action: format!("{service}.{action}"),
            risk: command.spec().risk.as_str(),
            params: command.params_json(),
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let backend = Arc::clone(&self.backend);
        let on = device.clone();
        let mut task = super::elicit::Running::spawn(async move {
            backend.call(on.as_deref(), command, Some(tx)).await
        });
        let approval_id = tokio::select! {
            id = rx => id.ok(),
            result = task.result() => {
                return Ok(Step::Done(wrap(device, service, action, result?)));
            }
        };
        let Some(approval_id) = approval_id else {
            let result = task.result().await?;
            return Ok(Step::Done(wrap(device, service, action, result)));
        };
        let question = super::elicit::Question {
            approval_id: approval_id.clone(),
            ..question
        };
        let wait = self.backend.approval_wait();
        match mode {
            super::elicit::Mode::Request => {
                let request = rmcp::model::ServerRequest::ElicitRequest(
                    rmcp::model::ElicitRequest::new(question.params()),
                );
                let asked = context
                    .peer
                    .send_request_with_option(
                        request,
                        rmcp::service::PeerRequestOptions::with_timeout(wait),
                    )
                    .await;
                let answer = match asked {
                    Ok(handle) => {
                        let id = handle.id.clone();
                        tokio::select! {
                            // Answered elsewhere first: that answer stands,
                            // and the client's form is withdrawn.
                            result = task.result() => {
                                let cancel = rmcp::model::CancelledNotificationParam::new(
                                    Some(id),
                                    Some("the approval was answered elsewhere".into()),
                                );
                                if let Err(e) = context.peer.notify_cancelled(cancel).await {
                                    tracing::debug!(error = %e, "elicitation not cancelled");
                                }
                                return Ok(Step::Done(wrap(device, service, action, result?)));
                            }
                            answer = handle.await_response() => match answer {
                                Ok(rmcp::model::ClientResult::ElicitResult(answer)) => Ok(answer),
                                Ok(_) => Err("an unexpected answer".to_owned()),
                                Err(e) => Err(e.to_string()),
                            },
                        }
                    }
                    Err(e) => Err(e.to_string()),
                };
                match answer {
                    Ok(answer) => {
                        let answer = super::elicit::read(&answer);
                        let backend = &self.backend;
                        let by = super::elicit::decider(context, self.elicitor.as_deref());
                        super::elicit::record(&approval_id, &answer, &by, || {
                            backend.answer(&approval_id, &answer, &by)
                        })
                        .await;
                    }
                    Err(e) => tracing::info!(
                        approval = approval_id,
                        error = %e,
                        "the MCP client did not answer the elicitation; the call waits for an approval elsewhere"
                    ),
                }
                let result = with_progress(task.result(), context).await?;
                Ok(Step::Done(wrap(device, service, action, result)))
            }
            super::elicit::Mode::Input => {
                let name = request.name.as_ref();
                let binding = super::elicit::Binding::of(name, &arguments, context);
                let input_requests = question.input_requests();
                let waiting = super::elicit::Waiting {
                    approval_id,
                    task,
                    device,
                    service,
                    action,
                };
                match self.pending.insert(binding, waiting, wait) {
                    Ok(handle) => Ok(Step::Ask(rmcp::model::InputRequiredResult::new(
                        Some(input_requests),
                        Some(handle),
                    ))),
                    Err((e, mut waiting)) => {
                        // Cannot ask: wait for an answer elsewhere, as
                        // for a client without elicitation.
                        tracing::warn!(error = %e, "approval not asked in the MCP client");
                        let result = with_progress(waiting.task.result(), context).await?;
                        Ok(Step::Done(wrap(
                            waiting.device,
                            waiting.service,
                            waiting.action,
                            result,
                        )))
                    }
                }
            }
        }
    }

    /// A 2026-07-28 client's retry with the answer (`inputResponses`) and
    /// the handle (`requestState`): record the answer, then return the
    /// call's outcome.
    async fn resume(
        &self,
        request: &CallToolRequestParams,
        handle: &str,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let arguments = request.arguments.clone().unwrap_or_default();
        let binding = super::elicit::Binding::of(request.name.as_ref(), &arguments, context);
        let mut waiting = match self.pending.take(handle, &binding) {
            Ok(waiting) => waiting,
            Err(why) => {
                tracing::info!(tool = %request.name, ?why, "MCP retry with a refused requestState");
                return super::elicit::refused(why);
            }
        };
        let answer = super::elicit::read_response(request.input_responses.as_ref());
        let id = waiting.approval_id.clone();
        let backend = &self.backend;
        let by = super::elicit::decider(context, self.elicitor.as_deref());
        super::elicit::record(&id, &answer, &by, || backend.answer(&id, &answer, &by)).await;
        match with_progress(waiting.task.result(), context).await {
            Ok(result) => CallToolResult::structured(wrap(
                waiting.device.clone(),
                waiting.service,
                waiting.action,
                result,
            )),
            Err(e) => tool_error(&e),
        }
    }
}

/// A device call's result as the tool returns it.
fn wrap(device: Option<String>, service: &str, action: &str, result: Value) -> Value {
    json!({
        "device": device,
        "service": service,
        "action": action,
        "result": result,
    })
}

/// Run `call`, sending `notifications/progress` every [`PROGRESS_EVERY`]
/// while it waits, when the client gave a progress token.
async fn with_progress<F>(call: F, context: &RequestContext<RoleServer>) -> Result<Value, WireError>
where
    F: std::future::Future<Output = Result<Value, WireError>>,
{
    let Some(token) = context.meta.get_progress_token() else {
        return call.await;
    };
    tokio::pin!(call);
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    tick.tick().await;
    let mut waited = 0u32;
    loop {
        tokio::select! {
            result = &mut call => return result,
            _ = tick.tick() => {
                waited += 1;
                let mut param = ProgressNotificationParam::new(token.clone(), f64::from(waited));
                param.message = Some(format!(
                    "still waiting after {} s (a risky action waits for approval: droidwarden approvals)",
                    u64::from(waited) * PROGRESS_EVERY.as_secs()
                ));
                if let Err(e) = context.peer.notify_progress(param).await {
                    tracing::debug!(error = %e, "progress notification not sent");
                }
            }
        }
    }
}

/// The device a state URI names.
fn device_of(uri: &str) -> Option<&str> {
    uri.strip_prefix(RESOURCE_PREFIX)
        .and_then(|rest| rest.strip_suffix(RESOURCE_SUFFIX))
        .filter(|name| !name.is_empty())
}

/// A client's URI as an error shows it: its first 200 characters.
fn shown(uri: &str) -> String {
    uri.chars().take(200).collect()
}

fn tool_error(error: &WireError) -> CallToolResult {
    CallToolResult::structured_error(json!({ "error": error }))
}

impl ServerHandler for PhoneServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_resources_subscribe()
                .build(),
        )
        .with_server_info(Implementation::new("droidwarden", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Read and control the user's Android phones. Call list_devices to see the phones; risky actions wait for the user's approval. The prompts are droidwarden's skills: instructions for a task, carried out with these tools.",
        )
    }

    /// Clients of earlier protocol versions hear of list changes without
    /// subscribing: watch the phones for them (2026-07-28 clients ask
    /// through `subscriptions/listen`, [`Self::listen`]).
    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        let legacy = context
            .peer
            .peer_info()
            .is_some_and(|i| i.protocol_version.has_initialize());
        if !legacy {
            return;
        }
        match &self.tasks {
            Some((tracker, shutdown)) => {
                tracker.spawn(
                    self.clone()
                        .announce_changes(context.peer.clone(), shutdown.clone()),
                );
            }
            None => {
                tokio::spawn(
                    self.clone()
                        .announce_changes(context.peer.clone(), CancellationToken::new()),
                );
            }
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        match self.tools().await {
            Ok(tools) => Ok(ListToolsResult::with_all_items(tools.tools().to_vec())),
            Err(e) => Err(McpError::internal_error(
                e.message.clone(),
                Some(json!({ "error": e })),
            )),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if let Some(handle) = request.request_state.as_deref() {
            return Ok(self.resume(&request, handle, &context).await.into());
        }
        let result = match self.run_tool(&request, &context).await {
            Ok(Step::Done(value)) => CallToolResult::structured(value),
            Ok(Step::Ask(input)) => return Ok(input.into()),
            Err(e) => {
                tracing::debug!(tool = %request.name, error = %e, "MCP tool call failed");
                tool_error(&e)
            }
        };
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(super::prompts::list(
            &self.skills,
        )))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        super::prompts::get(&self.skills, &request.name, request.arguments).map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let devices = self
            .backend
            .devices()
            .await
            .map_err(|e| McpError::internal_error(e.message.clone(), None))?;
        Ok(ListResourcesResult::with_all_items(
            devices
                .iter()
                .map(|d| {
                    Resource::new(
                        format!("{RESOURCE_PREFIX}{}{RESOURCE_SUFFIX}", d.name),
                        format!("{} state", d.name),
                    )
                    .with_mime_type("application/json")
                    .with_description(format!(
                        "The current state of phone {}: availability and the last status of each service",
                        d.name
                    ))
                })
                .collect(),
        ))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        accepted.resources_list_changed = requested.resources_list_changed;
        accepted.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
            uris.iter()
                .filter(|uri| device_of(uri).is_some())
                .cloned()
                .collect()
        });
        Some(accepted)
    }

    /// `resources/updated` for each subscribed device state when it
    /// changes (read every [`WATCH_EVERY`]), and the tools and resources
    /// list changes when the phones change (read every [`DEVICES_EVERY`]),
    /// as the client asked, until it cancels.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let accepted = context.accepted();
        let (tools_changed, resources_changed) = (
            accepted.tools_list_changed == Some(true),
            accepted.resources_list_changed == Some(true),
        );
        let lists = tools_changed || resources_changed;
        let mut last: HashMap<String, Option<Value>> = HashMap::new();
        for uri in &uris {
            let state = self.watched_state(uri).await;
            last.insert(uri.to_owned(), state);
        }
        let mut key = if lists { self.tools_key().await } else { None };
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ticks = 0u64;
        let every = (DEVICES_EVERY.as_secs() / WATCH_EVERY.as_secs().max(1)).max(1);
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                _ = tick.tick() => {}
            }
            ticks += 1;
            if lists && ticks.is_multiple_of(every) {
                let now = self.tools_key().await;
                if now.is_some() && now != key {
                    key = now;
                    let sink = context.sink();
                    let sent = async {
                        if tools_changed {
                            sink.notify_tool_list_changed().await?;
                        }
                        if resources_changed {
                            sink.notify_resource_list_changed().await?;
                        }
                        Ok::<(), rmcp::service::SubscriptionSendError>(())
                    };
                    if let Err(e) = sent.await {
                        tracing::debug!(error = %e, "list change not sent");
                        return Ok(());
                    }
                }
            }
            for uri in &uris {
                let state = self.watched_state(uri).await;
                if last.get(uri) != Some(&state) {
                    last.insert(uri.to_owned(), state);
                    if let Err(e) = context.sink().notify_resource_updated(uri.clone()).await {
                        tracing::debug!(error = %e, "resource update not sent");
                        return Ok(());
                    }
                }
            }
        }
    }

    // rmcp routes `resources/subscribe` here only for clients of protocol
    // 2025-11-25 and earlier, which have no `subscriptions/listen`; most
    // clients in use still speak it, so the legacy method stays offered.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri;
        let unknown = || {
            McpError::invalid_params(
                format!(
                    "no such resource: {} (subscribable: {RESOURCE_PREFIX}<device>{RESOURCE_SUFFIX})",
                    shown(&uri)
                ),
                Some(json!({ "uri": shown(&uri) })),
            )
        };
        let state = self.resource_state(&uri, unknown).await?;
        let start = self
            .subscriptions
            .add(&uri, Some(state))
            .await
            .map_err(|super::subscribe::TooMany| {
                McpError::invalid_params(
                    format!(
                        "at most {} resource subscriptions per connection: unsubscribe from one first",
                        super::subscribe::MAX_SUBSCRIPTIONS
                    ),
                    None,
                )
            })?;
        if start {
            let (server, peer) = (self.clone(), context.peer.clone());
            let stop = self
                .tasks
                .as_ref()
                .map_or_else(CancellationToken::new, |(_, shutdown)| shutdown.clone());
            let watch = async move {
                let subscriptions = Arc::clone(&server.subscriptions);
                subscriptions
                    .watch(peer, WATCH_EVERY, stop, |uri| {
                        let server = server.clone();
                        async move { server.watched_state(&uri).await }
                    })
                    .await;
            };
            match &self.tasks {
                Some((tracker, _)) => {
                    tracker.spawn(watch);
                }
                None => {
                    tokio::spawn(watch);
                }
            }
        }
        Ok(())
    }

    // See `subscribe`: the legacy method's other half.
    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.remove(&request.uri).await;
        Ok(())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let not_found = || {
            McpError::resource_not_found(format!("no such resource: {}", shown(&request.uri)), None)
        };
        let state = self.resource_state(&request.uri, not_found).await?;
        Ok(
            ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
                uri: request.uri.clone(),
                mime_type: Some("application/json".into()),
                text: state.to_string(),
                meta: None,
            }])
            .into(),
        )
    }
}
