//! A mini POSIX shell: the part of `/system/bin/sh` that ADB clients rely on.
//!
//! `parse` turns a command line into a `Script`; `interp` runs it against a
//! `Host`, which executes (and records) each simple command. The shell knows
//! nothing about the phone: commands, their output and the command log are
//! the host's business. Execution is synchronous; a command that "takes time"
//! (`sleep`) reports a delay that the caller waits out before replying.

mod interp;
mod parse;

use std::time::Duration;

pub(crate) use interp::{SH, run};

/// An output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fd {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Ordered stdout/stderr output (order matters for merged `shell:` replies).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Output {
    chunks: Vec<(Fd, Vec<u8>)>,
}

impl Output {
    /// Appends bytes to a stream, merging with the previous chunk of the same stream.
    pub(crate) fn push(&mut self, fd: Fd, bytes: impl AsRef<[u8]>) {
        let bytes = bytes.as_ref();
        if bytes.is_empty() {
            return;
        }
        match self.chunks.last_mut() {
            Some((last, buf)) if *last == fd => buf.extend_from_slice(bytes),
            _ => self.chunks.push((fd, bytes.to_vec())),
        }
    }

    /// Appends to stdout.
    pub(crate) fn out(&mut self, bytes: impl AsRef<[u8]>) {
        self.push(Fd::Stdout, bytes);
    }

    /// Appends to stderr.
    pub(crate) fn err(&mut self, bytes: impl AsRef<[u8]>) {
        self.push(Fd::Stderr, bytes);
    }

    /// Appends a line to stdout.
    pub(crate) fn outln(&mut self, line: impl AsRef<str>) {
        self.out(line.as_ref());
        self.out("\n");
    }

    /// Appends a line to stderr.
    pub(crate) fn errln(&mut self, line: impl AsRef<str>) {
        self.err(line.as_ref());
        self.err("\n");
    }

    /// Everything written to one stream.
    pub(crate) fn stream(&self, fd: Fd) -> Vec<u8> {
        self.chunks
            .iter()
            .filter(|(f, _)| *f == fd)
            .flat_map(|(_, b)| b.iter().copied())
            .collect()
    }

    /// Consumes into the ordered chunks.
    pub(crate) fn into_chunks(self) -> Vec<(Fd, Vec<u8>)> {
        self.chunks
    }
}

/// What one command did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CommandResult {
    pub(crate) output: Output,
    pub(crate) status: u8,
    /// Time the command "took" (`sleep`); added up and waited by the caller.
    pub(crate) delay: Duration,
}

impl CommandResult {
    /// A result with output and a status.
    pub(crate) fn new(output: Output, status: u8) -> Self {
        Self {
            output,
            status,
            delay: Duration::ZERO,
        }
    }
}

/// What a whole command line did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RunOutcome {
    pub(crate) output: Output,
    pub(crate) status: u8,
    pub(crate) delay: Duration,
}

/// Where commands run: the phone.
pub(crate) trait Host {
    /// Records one simple command about to run, exactly as the shell split it.
    fn record(&mut self, argv: &[String]);
    /// Runs a command that is not a shell builtin.
    fn exec(&mut self, argv: &[String], stdin: &[u8]) -> CommandResult;
    /// Contents of a readable file, for `<` redirections.
    fn read_file(&self, path: &str) -> Option<Vec<u8>>;
}
