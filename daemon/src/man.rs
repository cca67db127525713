//! `droidwarden man`: the manual page, generated from the same clap
//! definitions the parser uses, with the sections a daemon's page needs
//! that clap does not know: EXIT STATUS, ENVIRONMENT, FILES and SEE ALSO.
//!
//! clap_mangen's own subcommand section names a `droidwarden-<command>(1)`
//! page for each subcommand; only one page exists, so the commands are
//! listed here by name, each with its `--help` line.

use std::io::Write;

/// Write the page (roff) to `out`.
pub(crate) fn render(cli: clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cli.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    writeln!(out, ".SH COMMANDS")?;
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        writeln!(out, ".TP\n\\fB{}\\fR", roff_escape(sub.get_name()))?;
        if let Some(about) = sub.get_about() {
            writeln!(out, "{}", roff_escape(&about.to_string()))?;
        }
    }
    writeln!(
        out,
        ".PP\n\\fBdroidwarden\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR describes each command in full."
    )?;
    for (section, body) in SECTIONS {
        writeln!(out, ".SH {section}")?;
        for line in body.lines() {
            writeln!(out, "{}", line.trim_start())?;
        }
    }
    man.render_version_section(out)?;
    Ok(())
}

/// Text for roff: a leading `.` or `'` would be read as a request, and a
/// backslash as an escape.
fn roff_escape(text: &str) -> String {
    let text = text.replace('\\', "\\e").replace('-', "\\-");
    if text.starts_with('.') || text.starts_with('\'') {
        format!("\\&{text}")
    } else {
        text
    }
}

/// The sections after COMMANDS, in roff. Kept true with
/// `systemd/README.md` (exit statuses) and `config.rs` (files, variables).
const SECTIONS: [(&str, &str); 4] = [
    (
        "EXIT STATUS",
        r".TP
        \fB0\fR
        Success; for \fBdaemon\fR, stopped by SIGTERM or SIGINT.
        .TP
        \fB1\fR
        Any other failure (a call's error, the daemon unreachable, a bus or the broker's port unavailable).
        .TP
        \fB3\fR
        \fBask\fR: the run ended without an answer (at its step limit, or empty).
        .TP
        \fB73\fR
        The state directory or a file in it cannot be created.
        .TP
        \fB74\fR
        An I/O error on the state (the message names the file and what to do).
        .TP
        \fB78\fR
        A configuration error, or a damaged \fImqtt\-users.json\fR; systemd does not restart the service for it.",
    ),
    (
        "ENVIRONMENT",
        r".TP
        \fBDROIDWARDEN__\fISECTION\fB__\fIKEY\fR
        Overrides one configuration key, e.g. \fBDROIDWARDEN__CALLS__TIMEOUT_MS=20000\fR; an error names the variable.
        .TP
        \fBRUST_LOG\fR
        The log filter, e.g. \fBinfo\fR or \fBdroidwarden=debug\fR (default \fBinfo\fR).
        .TP
        \fBANDROID_ADB_SERVER_PORT\fR
        The adb server's port, as adb itself reads it (default 5037).
        .TP
        \fBSTATE_DIRECTORY\fR, \fBRUNTIME_DIRECTORY\fR, \fBCREDENTIALS_DIRECTORY\fR
        Set by systemd: the state directory, where the private API socket goes, and the secrets a unit's \fBLoadCredential=\fR provides (\fB${CREDENTIALS_DIRECTORY}/\fIname\fR in a *_file key).
        .TP
        \fBNOTIFY_SOCKET\fR, \fBJOURNAL_STREAM\fR
        Set by systemd: readiness and watchdog notifications, and logging to the journal with structured fields.
        .TP
        \fBXDG_STATE_HOME\fR
        Where the state goes when not run by systemd or as root (\fI$XDG_STATE_HOME/droidwarden\fR).",
    ),
    (
        "FILES",
        r".TP
        \fI/etc/droidwarden/config.toml\fR
        The configuration, when present (\fB\-\-config\fR names another). \fBdroidwarden config print\-default\fR prints the built\-in defaults; \fBdroidwarden config check\fR validates a file.
        .TP
        \fI/var/lib/droidwarden/\fR
        The state directory of the system service (root or \fB$STATE_DIRECTORY\fR): \fIdelivery.db\fR (command ids and calls in flight), \fImqtt\-users.json\fR and \fImqtt\-daemon.secret\fR (the embedded broker's accounts), \fIha\-discovery.json\fR, \fIautomations.json\fR, the agent's sessions; kept private (0700).
        .TP
        \fIapi.sock\fR
        The daemon's private API socket, in \fB$RUNTIME_DIRECTORY\fR under systemd, else in the state directory.",
    ),
    (
        "SEE ALSO",
        r"\fBadb\fR(1), \fBmosquitto\fR(8), \fBsystemd.service\fR(5), \fBsystemctl\fR(1), \fBjournalctl\fR(1).
        The documentation in \fI/usr/share/doc/droidwarden/\fR (README.md and docs/).",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    fn page() -> String {
        let mut out = Vec::new();
        render(crate::cli::Args::command(), &mut out).expect("render");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn the_page_has_the_daemon_sections_and_names_no_missing_pages() {
        let page = page();
        for section in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH OPTIONS",
            ".SH COMMANDS",
            ".SH EXIT STATUS",
            ".SH ENVIRONMENT",
            ".SH FILES",
        ] {
            assert!(page.contains(section), "{section} missing");
        }
        assert!(
            !page.contains("droidwarden\\-status(1)") && !page.contains("droidwarden-status(1)"),
            "names a page that does not exist"
        );
        assert!(page.contains("\\fBstatus\\fR"), "lists the commands");
        for status in ["\\fB73\\fR", "\\fB74\\fR", "\\fB78\\fR"] {
            assert!(page.contains(status), "{status}");
        }
    }

    #[test]
    fn every_line_of_the_extra_sections_is_roff_not_indented_text() {
        for line in page().lines() {
            assert!(
                !line.starts_with(' ') && !line.starts_with('\t'),
                "an indented line is shown verbatim by man: {line:?}"
            );
        }
    }

    #[test]
    fn command_text_cannot_become_a_request() {
        assert_eq!(roff_escape(".x"), "\\&.x");
        assert_eq!(roff_escape("a-b\\c"), "a\\-b\\ec");
    }
}
