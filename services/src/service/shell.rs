//! The `shell` service: run one program on the phone.

use super::*;

actions!(
    /// `shell` actions.
    ShellAction {
        Run = "run" (Critical, changes)
            "Run a program with arguments on the phone (argv: program first, one element per argument; no shell syntax: pipes, redirections and variables are passed literally). Returns the exit status and output."
        {
            /// The program and its arguments, one element each.
            argv: Argv,
        }
        -> ShellRun
        example(Self::Run {
            argv: Argv(vec!["getprop".into(), "ro.build.version.release".into()]),
        }),
    }
);

/// A program and its arguments: 1 to [`Argv::MAX_ARGS`] elements, never
/// one string for a shell to split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct Argv(Vec<String>);

impl Argv {
    /// The most elements an argv may have.
    pub const MAX_ARGS: usize = 64;

    /// The elements, program first.
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }
}

field_types!(
    Argv => Schema::array(
        "program and arguments, at most 64 elements",
        text_param("one argument", 1024),
    ),
);

impl TryFrom<Vec<String>> for Argv {
    type Error = String;
    fn try_from(argv: Vec<String>) -> Result<Self, String> {
        if argv.is_empty() {
            return Err("argv must name a program".into());
        }
        if argv.len() > Self::MAX_ARGS {
            return Err(format!("argv has more than {} elements", Self::MAX_ARGS));
        }
        if argv[0].is_empty() {
            return Err("argv[0] (the program) must not be empty".into());
        }
        Ok(Self(argv))
    }
}

impl From<Argv> for Vec<String> {
    fn from(argv: Argv) -> Self {
        argv.0
    }
}

records! {
    /// What `shell.run` answers.
    ShellRun {
        /// The program's exit status.
        exit: i64,
        /// Standard output, at most 64 KiB (cut at a character boundary).
        stdout: String,
        /// Standard error, at most 64 KiB (cut at a character boundary).
        stderr: String,
        /// Whether either stream was cut at 64 KiB.
        truncated: bool,
    }
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "shellRunner",
        id: "shell",
        description: "Run one program on the phone, as the adb shell user. Off unless enabled in the daemon's configuration; every run needs a person's approval.",
        actions: ShellAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
