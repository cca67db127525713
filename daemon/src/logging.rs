//! Logging: to the journal with structured fields when standard error is
//! the journal (a systemd service), to standard error otherwise.
//!
//! Values in log lines often come from outside: a phone's model name, an
//! app's notification, a command id from MQTT. Written raw, such a value can
//! carry terminal escape sequences (recolour or rewrite the operator's
//! screen), a carriage return or newline (forge a log line), or Unicode
//! format characters (a right-to-left override that makes `gpj.exe` read as
//! `exe.jpg`). Every field value written to standard error therefore goes
//! through [`Escaped`], which writes C0 and C1 control characters, DEL and
//! Unicode format and line-separator characters as `\u{…}` escapes
//! (`\n`, `\r`, `\t` as themselves escaped). Colours are only written when
//! standard error is a terminal and `NO_COLOR` is unset.

use std::fmt::{self, Write as _};
use std::io::IsTerminal as _;
use tracing::field::Field;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::MakeExt as _;
use tracing_subscriber::fmt::format::{Writer, debug_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Install the process's logger. `default_level` applies without `RUST_LOG`.
pub(crate) fn init(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    if !crate::systemd::stderr_is_journal() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(colour)
            .fmt_fields(debug_fn(write_field).delimited(" "))
            .init();
        return;
    }
    match tracing_journald::layer() {
        Ok(journal) => {
            // Our field names (device, service, action, session, error …)
            // become DEVICE=, SERVICE= … as they are: none is a journal
            // field, and `journalctl DEVICE=kitchen-tablet` reads well.
            // The journal stores values as binary-safe fields and
            // `journalctl` shows unprintable ones as blobs.
            let journal = journal
                .with_field_prefix(None)
                .with_syslog_identifier("droidwarden".into());
            tracing_subscriber::registry()
                .with(filter)
                .with(journal)
                .init();
        }
        Err(e) => {
            // Without a journal socket (a container), the journal stream
            // gets plain lines without colours or timestamps, which it
            // adds itself.
            tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .without_time()
                .fmt_fields(debug_fn(write_field).delimited(" "))
                .init();
            tracing::warn!(error = %e, "standard error is the journal but its socket cannot be reached; logging plain lines");
        }
    }
}

/// One field as the default formatter writes it (`name=value`, the message
/// bare), with the value escaped.
fn write_field(writer: &mut Writer<'_>, field: &Field, value: &dyn fmt::Debug) -> fmt::Result {
    let name = field.name();
    if name != "message" {
        write!(writer, "{}=", name.strip_prefix("r#").unwrap_or(name))?;
    }
    write!(Escaped(writer), "{value:?}")
}

/// A `fmt::Write` that escapes what a terminal or a log reader would
/// interpret.
pub(crate) struct Escaped<W>(pub(crate) W);

impl<W: fmt::Write> fmt::Write for Escaped<W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some(at) = rest.find(needs_escape) {
            self.0.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().unwrap_or_default();
            match c {
                '\n' => self.0.write_str("\\n")?,
                '\r' => self.0.write_str("\\r")?,
                '\t' => self.0.write_str("\\t")?,
                c => write!(self.0, "\\u{{{:x}}}", u32::from(c))?,
            }
            rest = &rest[at + c.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

/// C0, DEL, C1, and the Unicode format (Cf) and separator (Zl, Zp)
/// characters that change how the text around them is shown.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            u32::from(c),
            0x00AD
                | 0x0600..=0x0605
                | 0x061C
                | 0x06DD
                | 0x070F
                | 0x0890..=0x0891
                | 0x08E2
                | 0x180E
                | 0x200B..=0x200F
                | 0x2028..=0x202E
                | 0x2060..=0x2064
                | 0x2066..=0x206F
                | 0xFEFF
                | 0xFFF9..=0xFFFB
                | 0x110BD
                | 0x110CD
                | 0x13430..=0x1343F
                | 0x1BCA0..=0x1BCA3
                | 0x1D173..=0x1D17A
                | 0xE0001
                | 0xE0020..=0xE007F
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn escaped(s: &str) -> String {
        let mut out = String::new();
        write!(Escaped(&mut out), "{s}").unwrap();
        out
    }

    #[test]
    fn controls_and_format_characters_are_escaped_and_text_is_kept() {
        assert_eq!(escaped("Pixel 8 — Grüße 你好"), "Pixel 8 — Grüße 你好");
        assert_eq!(escaped("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(escaped("a\u{9b}31mb"), "a\\u{9b}31mb");
        assert_eq!(escaped("x\r\nforged"), "x\\r\\nforged");
        assert_eq!(escaped("gpj.\u{202e}exe"), "gpj.\\u{202e}exe");
        assert_eq!(
            escaped("\u{200b}\u{feff}\u{7f}\u{0}"),
            "\\u{200b}\\u{feff}\\u{7f}\\u{0}"
        );
        assert_eq!(escaped("\u{e0041}"), "\\u{e0041}");
    }

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_hostile_value_reaches_the_log_line_escaped() {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .fmt_fields(debug_fn(write_field).delimited(" "))
            .finish();
        let model = "Pixel\u{1b}]0;pwned\u{7}\u{9b}2J\n2026-01-01 INFO forged \u{202e}";
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(model = %model, id = ?model, "device online: {model}");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text.lines().count(),
            1,
            "one line, not a forged second: {text:?}"
        );
        for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}', '\r'] {
            assert!(!text.contains(bad), "{bad:?} reached the log: {text:?}");
        }
        assert!(text.contains("model=Pixel\\u{1b}]0;pwned"), "{text}");
        assert!(text.contains("device online: Pixel"), "{text}");
    }
}
