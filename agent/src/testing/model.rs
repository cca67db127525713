//! [`ScriptedModel`]: a provider without HTTP.

use crate::error::AgentError;
use crate::message::ModelReply;
use crate::provider::{ChatRequest, Provider, ReplyFuture, TextSink};
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Mutex, PoisonError};

type ReplyFn = Box<dyn Fn(&ChatRequest) -> ModelReply + Send + Sync>;

/// A model that answers from a script (or a function), in process.
pub struct ScriptedModel {
    script: Mutex<VecDeque<Result<ModelReply, u16>>>,
    reply_fn: Option<ReplyFn>,
    requests: Mutex<Vec<ChatRequest>>,
    record: bool,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("remaining", &self.remaining())
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// Replies in order; the requests are recorded. When the script runs
    /// out the model fails with HTTP 500.
    pub fn new(replies: impl IntoIterator<Item = ModelReply>) -> Self {
        Self {
            script: Mutex::new(replies.into_iter().map(Ok).collect()),
            reply_fn: None,
            requests: Mutex::new(Vec::new()),
            record: true,
        }
    }

    /// A model that answers `texts` in turn (no tool calls).
    pub fn texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        Self::new(texts.into_iter().map(ModelReply::text))
    }

    /// Answer every request with `f(request)`; nothing is recorded (zero
    /// cost, for benchmarks).
    pub fn from_fn(f: impl Fn(&ChatRequest) -> ModelReply + Send + Sync + 'static) -> Self {
        Self {
            script: Mutex::new(VecDeque::new()),
            reply_fn: Some(Box::new(f)),
            requests: Mutex::new(Vec::new()),
            record: false,
        }
    }

    /// Append a reply.
    pub fn push(&self, reply: ModelReply) {
        self.script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(Ok(reply));
    }

    /// Append a failure: the call fails as if the provider answered `status`.
    pub fn push_failure(&self, status: u16) {
        self.script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(Err(status));
    }

    /// Scripted replies not used yet.
    pub fn remaining(&self) -> usize {
        self.script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Provider for ScriptedModel {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn complete<'a>(&'a self, request: &'a ChatRequest, on_text: TextSink<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            if self.record {
                self.requests
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(request.clone());
            }
            let next = match &self.reply_fn {
                Some(f) => Ok(f(request)),
                None => self
                    .script
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .pop_front()
                    .unwrap_or(Err(500)),
            };
            match next {
                Ok(reply) => {
                    if !reply.text.is_empty() {
                        on_text(&reply.text);
                    }
                    Ok(reply)
                }
                Err(status) => Err(AgentError::Http {
                    provider: "scripted",
                    status,
                    attempts: 1,
                    message: "scripted failure (or the script ran out)".into(),
                }),
            }
        })
    }
}
