//! The ADB device protocol over TCP, as the real adb server expects it.
//!
//! `message` frames the 24-byte header, `service` parses service strings
//! and frames replies (shell v2 packets, raw shell, exec), `session` is the
//! pure connection state machine and `conn` the async driver that performs
//! its actions on a socket. Only the driver does I/O.

mod conn;
mod message;
mod service;
mod session;
mod sync;

pub(crate) use conn::serve_connection;
