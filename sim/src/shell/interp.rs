//! Runs a parsed command line: expansion, field splitting, `&&`/`||`,
//! pipelines, redirections and the few builtins the host cannot provide
//! (`exit`, `sh -c`). Every simple command, builtin or not, is recorded with
//! the host before it runs.

use std::time::Duration;

use super::parse::{self, AndOr, Command, Connector, Part, Pipeline, RedirOp, Script, Word};
use super::{CommandResult, Fd, Host, Output, RunOutcome};

/// The shell's name in its own error messages.
pub(crate) const SH: &str = "/system/bin/sh";

/// Parses and runs `src` on `host`. A syntax error is reported like `sh`
/// does (on stderr, exit status 2) and nothing runs.
pub(crate) fn run(src: &str, host: &mut dyn Host) -> RunOutcome {
    let mut output = Output::default();
    match parse::parse(src) {
        Ok(script) => {
            let mut interp = Interp {
                host,
                last: 0,
                exited: false,
                delay: Duration::ZERO,
            };
            interp.script(&script, &mut output);
            RunOutcome {
                output,
                status: interp.last,
                delay: interp.delay,
            }
        }
        Err(e) => {
            output.errln(format!("{SH}: {e}"));
            RunOutcome {
                output,
                status: 2,
                delay: Duration::ZERO,
            }
        }
    }
}

struct Interp<'h> {
    host: &'h mut dyn Host,
    last: u8,
    exited: bool,
    delay: Duration,
}

/// Where a command's stdout or stderr goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    Stdout,
    Stderr,
    Null,
}

fn param(name: &str) -> String {
    match name {
        "HOME" => "/",
        "PATH" => {
            "/product/bin:/apex/com.android.runtime/bin:/apex/com.android.art/bin:/system_ext/bin:/system/bin:/system/xbin:/odm/bin:/vendor/bin:/vendor/xbin"
        }
        "USER" | "LOGNAME" => "shell",
        "SHELL" | "0" => SH,
        "TMPDIR" => "/data/local/tmp",
        "HOSTNAME" => "localhost",
        "ANDROID_DATA" => "/data",
        "ANDROID_ROOT" => "/system",
        "EXTERNAL_STORAGE" => "/sdcard",
        "$" => "4242",
        "#" => "0",
        _ => "",
    }
    .to_owned()
}

impl Interp<'_> {
    fn script(&mut self, script: &Script, out: &mut Output) {
        for item in &script.items {
            if self.exited {
                return;
            }
            self.and_or(item, out);
        }
    }

    fn and_or(&mut self, item: &AndOr, out: &mut Output) {
        self.last = self.pipeline(&item.first, out);
        for (connector, pipeline) in &item.rest {
            if self.exited {
                return;
            }
            let run = match connector {
                Connector::And => self.last == 0,
                Connector::Or => self.last != 0,
            };
            if run {
                self.last = self.pipeline(pipeline, out);
            }
        }
    }

    fn pipeline(&mut self, pipeline: &Pipeline, out: &mut Output) -> u8 {
        let mut stdin = Vec::new();
        let mut status = 0;
        let count = pipeline.commands.len();
        for (i, cmd) in pipeline.commands.iter().enumerate() {
            if self.exited {
                break;
            }
            if i + 1 == count {
                status = self.command(cmd, &stdin, out);
            } else {
                let mut piped = Output::default();
                status = self.command(cmd, &stdin, &mut piped);
                stdin = piped.stream(Fd::Stdout);
                out.err(piped.stream(Fd::Stderr));
            }
        }
        if pipeline.negate {
            u8::from(status == 0)
        } else {
            status
        }
    }

    fn expand_word(&mut self, word: &Word, out: &mut Output) -> Vec<String> {
        let mut fields = Vec::new();
        let mut current = String::new();
        let mut valid = false;
        for part in word {
            let (text, split) = match part {
                Part::Lit { text, quoted } => {
                    if *quoted || !text.is_empty() {
                        valid = true;
                    }
                    current.push_str(text);
                    continue;
                }
                Part::LastStatus { quoted } => (self.last.to_string(), !quoted),
                Part::Param { name, quoted } => (param(name), !quoted),
                Part::Subst { script, quoted } => {
                    let mut sub = Output::default();
                    let mut inner = Interp {
                        host: &mut *self.host,
                        last: self.last,
                        exited: false,
                        delay: Duration::ZERO,
                    };
                    inner.script(script, &mut sub);
                    let (status, delay) = (inner.last, inner.delay);
                    self.last = status;
                    self.delay += delay;
                    out.err(sub.stream(Fd::Stderr));
                    let mut text = String::from_utf8_lossy(&sub.stream(Fd::Stdout)).into_owned();
                    while text.ends_with('\n') {
                        text.pop();
                    }
                    (text, !quoted)
                }
            };
            if split {
                for ch in text.chars() {
                    if matches!(ch, ' ' | '\t' | '\n') {
                        if valid {
                            fields.push(std::mem::take(&mut current));
                            valid = false;
                        }
                    } else {
                        current.push(ch);
                        valid = true;
                    }
                }
            } else {
                current.push_str(&text);
                valid = true;
            }
        }
        if valid {
            fields.push(current);
        }
        fields
    }

    fn command(&mut self, cmd: &Command, stdin: &[u8], out: &mut Output) -> u8 {
        let mut argv = Vec::new();
        for word in &cmd.words {
            let fields = self.expand_word(word, out);
            argv.extend(fields);
        }

        // Redirections, left to right, over a table of fds 1 and 2.
        let mut fds = [Sink::Stdout, Sink::Stderr];
        let mut input: Option<Vec<u8>> = None;
        for r in &cmd.redirs {
            let target = self.expand_word(&r.target, out).join(" ");
            match r.op {
                RedirOp::Out | RedirOp::Append => {
                    if target != "/dev/null" {
                        out.errln(format!(
                            "{SH}: can't create {target}: Read-only file system"
                        ));
                        return 1;
                    }
                    if let Some(slot) = fd_slot(&mut fds, r.fd) {
                        *slot = Sink::Null;
                    }
                }
                RedirOp::DupOut => {
                    let sink = match target.as_str() {
                        "1" => fds[0],
                        "2" => fds[1],
                        "-" => Sink::Null,
                        _ => {
                            out.errln(format!("{SH}: {target}: bad file descriptor"));
                            return 1;
                        }
                    };
                    if let Some(slot) = fd_slot(&mut fds, r.fd) {
                        *slot = sink;
                    }
                }
                RedirOp::In => match self.host.read_file(&target) {
                    Some(bytes) => {
                        if r.fd == 0 {
                            input = Some(bytes);
                        }
                    }
                    None => {
                        out.errln(format!(
                            "{SH}: can't open {target}: No such file or directory"
                        ));
                        return 1;
                    }
                },
                RedirOp::DupIn => {
                    if target != "0" && target != "-" {
                        out.errln(format!("{SH}: {target}: bad file descriptor"));
                        return 1;
                    }
                }
            }
        }

        if argv.is_empty() {
            // Only assignments or empty expansions: the status of the last
            // command substitution (already in `last`) stands.
            return self.last;
        }

        self.host.record(&argv);
        let stdin = input.as_deref().unwrap_or(stdin);
        let result = self
            .builtin(&argv, stdin)
            .unwrap_or_else(|| self.host.exec(&argv, stdin));
        self.delay += result.delay;
        for (fd, bytes) in result.output.into_chunks() {
            let sink = match fd {
                Fd::Stdout => fds[0],
                Fd::Stderr => fds[1],
            };
            match sink {
                Sink::Stdout => out.out(bytes),
                Sink::Stderr => out.err(bytes),
                Sink::Null => {}
            }
        }
        result.status
    }

    fn builtin(&mut self, argv: &[String], _stdin: &[u8]) -> Option<CommandResult> {
        let name = argv[0].as_str();
        match name {
            "exit" => {
                let mut output = Output::default();
                let status = match argv.get(1) {
                    None => self.last,
                    Some(n) => match n.parse::<i64>() {
                        Ok(v) => (v & 0xff) as u8,
                        Err(_) => {
                            output.errln(format!("{SH}: exit: {n}: bad number"));
                            2
                        }
                    },
                };
                self.exited = true;
                Some(CommandResult::new(output, status))
            }
            ":" => Some(CommandResult::default()),
            "sh" | "/system/bin/sh" | "/bin/sh" => {
                if argv.get(1).map(String::as_str) != Some("-c") {
                    let mut output = Output::default();
                    output.errln(format!(
                        "{SH}: {name}: interactive shells are not supported"
                    ));
                    return Some(CommandResult::new(output, 1));
                }
                let Some(src) = argv.get(2) else {
                    let mut output = Output::default();
                    output.errln(format!("{SH}: -c: option requires an argument"));
                    return Some(CommandResult::new(output, 2));
                };
                let outcome = run(src, &mut *self.host);
                Some(CommandResult {
                    output: outcome.output,
                    status: outcome.status,
                    delay: outcome.delay,
                })
            }
            _ => None,
        }
    }
}

fn fd_slot(fds: &mut [Sink; 2], fd: u32) -> Option<&mut Sink> {
    match fd {
        1 => Some(&mut fds[0]),
        2 => Some(&mut fds[1]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host that knows `echo`, `true`, `false`, `id`, `cat` and `fail`.
    #[derive(Default)]
    struct Fake {
        log: Vec<Vec<String>>,
    }

    impl Host for Fake {
        fn record(&mut self, argv: &[String]) {
            self.log.push(argv.to_vec());
        }

        fn exec(&mut self, argv: &[String], stdin: &[u8]) -> CommandResult {
            let mut out = Output::default();
            let status = match argv[0].as_str() {
                "echo" => {
                    out.outln(argv[1..].join(" "));
                    0
                }
                "true" => 0,
                "false" => 1,
                "id" => {
                    out.outln("uid=2000(shell) gid=2000(shell)");
                    0
                }
                "cat" => {
                    out.out(stdin);
                    0
                }
                "fail" => {
                    out.out("o1\n");
                    out.err("e1\n");
                    out.out("o2\n");
                    3
                }
                "slow" => {
                    return CommandResult {
                        output: out,
                        status: 0,
                        delay: Duration::from_millis(250),
                    };
                }
                other => {
                    out.errln(format!("{SH}: {other}: not found"));
                    127
                }
            };
            CommandResult::new(out, status)
        }

        fn read_file(&self, path: &str) -> Option<Vec<u8>> {
            (path == "/dev/null").then(Vec::new)
        }
    }

    fn sh(src: &str) -> (String, String, u8, Vec<Vec<String>>) {
        let mut host = Fake::default();
        let outcome = run(src, &mut host);
        (
            String::from_utf8_lossy(&outcome.output.stream(Fd::Stdout)).into_owned(),
            String::from_utf8_lossy(&outcome.output.stream(Fd::Stderr)).into_owned(),
            outcome.status,
            host.log,
        )
    }

    fn stdout(src: &str) -> String {
        sh(src).0
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn last_status_and_sequencing() {
        let (out, _, status, _) = sh("echo hi; false; echo rc=$?");
        assert_eq!(out, "hi\nrc=1\n");
        assert_eq!(status, 0);
        let (out, _, status, _) = sh("false");
        assert_eq!((out.as_str(), status), ("", 1));
        assert_eq!(
            stdout("true && echo a || echo b; false && echo c || echo d"),
            "a\nd\n"
        );
        assert_eq!(stdout("! true; echo $?; ! false; echo \"$?\""), "1\n0\n");
    }

    #[test]
    fn bridge_trailer() {
        // Exactly what the bridge sends.
        let (out, _, _, log) = sh("'dumpsys' 'battery' ; echo __dw_rc=$?");
        assert_eq!(out, "__dw_rc=127\n");
        assert_eq!(
            log,
            vec![
                argv(&["dumpsys", "battery"]),
                argv(&["echo", "__dw_rc=127"])
            ]
        );
    }

    #[test]
    fn hostile_quoted_arguments_stay_single_literal_words() {
        let hostile = [
            ("'a;b'", "a;b"),
            ("'$(id)'", "$(id)"),
            ("'`id`'", "`id`"),
            ("'a\nb'", "a\nb"),
            ("'x && rm -rf /'", "x && rm -rf /"),
            ("'it'\\''s'", "it's"),
            ("'$?'", "$?"),
            ("\"a|b>c\"", "a|b>c"),
            ("''", ""),
        ];
        for (quoted, literal) in hostile {
            let (_, _, _, log) = sh(&format!("'echo' {quoted} ; echo __dw_rc=$?"));
            assert_eq!(log[0], argv(&["echo", literal]), "{quoted}");
            assert_eq!(log.len(), 2, "{quoted}: exactly two commands ran");
        }
    }

    #[test]
    fn command_substitution_runs_and_is_recorded() {
        let (out, _, _, log) = sh("echo \"$(id)\"");
        assert_eq!(out, "uid=2000(shell) gid=2000(shell)\n");
        assert_eq!(
            log,
            vec![
                argv(&["id"]),
                argv(&["echo", "uid=2000(shell) gid=2000(shell)"])
            ]
        );
        // Unquoted: field-split into two arguments.
        let (_, _, _, log) = sh("echo $(id)");
        assert_eq!(
            log[1],
            argv(&["echo", "uid=2000(shell)", "gid=2000(shell)"])
        );
        // Backticks, nested quotes.
        assert_eq!(stdout("echo `echo a` \"[$(echo \"b  c\")]\""), "a [b  c]\n");
        // $? inside a substitution and the substitution's own status.
        assert_eq!(stdout("false; echo $(echo $?)"), "1\n");
        assert_eq!(stdout("$(false); echo $?"), "1\n");
    }

    #[test]
    fn empty_quoted_words_survive_and_unquoted_empty_vanishes() {
        let (_, _, _, log) = sh("echo \"\" $(true) '' \"$(true)\"");
        assert_eq!(
            log,
            vec![
                argv(&["true"]),
                argv(&["true"]),
                argv(&["echo", "", "", ""])
            ]
        );
    }

    #[test]
    fn pipes_feed_stdin() {
        let (out, err, status, log) = sh("fail | cat");
        assert_eq!(out, "o1\no2\n");
        assert_eq!(err, "e1\n");
        assert_eq!(status, 0);
        assert_eq!(log, vec![argv(&["fail"]), argv(&["cat"])]);
        assert_eq!(stdout("fail 2>&1 | cat"), "o1\ne1\no2\n");
    }

    #[test]
    fn redirections_route_output() {
        let (out, err, status, _) = sh("fail >/dev/null");
        assert_eq!((out.as_str(), err.as_str(), status), ("", "e1\n", 3));
        let (out, err, _, _) = sh("fail 2>/dev/null");
        assert_eq!((out.as_str(), err.as_str()), ("o1\no2\n", ""));
        let (out, err, _, _) = sh("echo x >&2");
        assert_eq!((out.as_str(), err.as_str()), ("", "x\n"));
        let (out, err, _, _) = sh("fail 2>&1 >/dev/null");
        assert_eq!((out.as_str(), err.as_str()), ("e1\n", ""));
        let (_, err, status, log) = sh("echo x > /sdcard/f");
        assert_eq!(
            err,
            "/system/bin/sh: can't create /sdcard/f: Read-only file system\n"
        );
        assert_eq!(status, 1);
        assert!(log.is_empty());
    }

    #[test]
    fn syntax_errors_run_nothing() {
        let (out, err, status, log) = sh("echo 'unterminated; id");
        assert_eq!(out, "");
        assert_eq!(err, "/system/bin/sh: syntax error: no closing quote\n");
        assert_eq!(status, 2);
        assert!(log.is_empty());
        let (_, err, status, _) = sh("echo a ;; echo b");
        assert_eq!(
            (err.as_str(), status),
            ("/system/bin/sh: syntax error: ';;' unexpected\n", 2)
        );
    }

    #[test]
    fn exit_and_sh_c() {
        let (out, _, status, _) = sh("echo a; exit 3; echo b");
        assert_eq!((out.as_str(), status), ("a\n", 3));
        let (out, _, status, log) = sh("sh -c 'echo in; false'; echo rc=$?");
        assert_eq!((out.as_str(), status), ("in\nrc=1\n", 0));
        assert_eq!(log[0], argv(&["sh", "-c", "echo in; false"]));
        assert_eq!(log[1], argv(&["echo", "in"]));
    }

    #[test]
    fn parameters() {
        assert_eq!(stdout("echo $HOME \"$USER\" x${NOPE}y"), "/ shell xy\n");
    }

    #[test]
    fn delays_add_up() {
        let mut host = Fake::default();
        let outcome = run("slow; slow; echo $(slow)", &mut host);
        assert_eq!(outcome.delay, Duration::from_millis(750));
    }
}
