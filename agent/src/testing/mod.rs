//! Test doubles, first-class and documented (feature `testing`; never used
//! by production code):
//!
//! * [`ScriptedLlm`] — a real HTTP/1.1 server on a free loopback port that
//!   speaks OpenAI Chat Completions, Anthropic Messages and Gemini
//!   `generateContent` (each with and without SSE streaming), replays
//!   scripted turns, injects failures (status codes with `Retry-After`,
//!   streams cut or stalled mid-way, a slow first byte), answers
//!   llama.cpp's `GET /props` when told to, and records every request it
//!   got.
//! * [`ScriptedModel`] — a [`crate::Provider`] in process: scripted replies
//!   or a function of the request, no HTTP (for the graph and the benchmark).
//! * [`FakeToolHost`] — a [`crate::ToolHost`] with configurable devices,
//!   canned or custom results, injected failures, a call log and
//!   concurrency counters.
//!
//! The server spawns its own tokio tasks: it is test infrastructure, not
//! library code, and it stops when the [`ScriptedLlm`] is dropped.

mod host;
mod model;
mod server;
mod wire;

pub use host::{FAKE_APP, FakeCall, FakeToolHost, full_device};
pub use model::ScriptedModel;
pub use server::{RecordedRequest, Responder, ScriptStep, ScriptedLlm};
pub use wire::{
    anthropic_events, anthropic_response, gemini_chunks, gemini_response, openai_chunks,
    openai_response,
};
