//! The agent's integration tests in one binary: scripted models (over HTTP
//! and in process), the fake tool host, a real SQLite store in a temporary
//! directory.

mod agent;
mod background;
mod common;
mod delegation;
mod external;
mod grants;
mod local_models;
mod plan;
mod providers;
mod skills;
mod small_models;
