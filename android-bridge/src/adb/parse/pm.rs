//! What `pm install`, `pm uninstall` and `pm clear` print.
//!
//! Success is a line `Success`. Failure is `Failure [CODE]` or `Failure
//! [CODE: message]` (install, uninstall; Android 5 and later), or `Failed`
//! (clear). Errors before the package manager ran (`Error: Unable to open
//! file: …`, `Exception occurred while executing …`) are the shared device
//! errors, recognised before this parser.

use super::error::ParseError;

/// `Ok(())` for `Success`; the failure line otherwise.
///
/// # Errors
/// [`ParseError::Malformed`] carrying the `Failure […]`/`Failed` line, or
/// the output when it has neither.
pub fn pm_outcome(command: &'static str, out: &str) -> Result<(), ParseError> {
    let lines: Vec<&str> = out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.contains(&"Success") {
        return Ok(());
    }
    let failure = lines
        .iter()
        .find(|l| l.starts_with("Failure") || l.starts_with("Failed"))
        .copied()
        .unwrap_or_else(|| lines.last().copied().unwrap_or("(no output)"));
    Err(ParseError::Malformed {
        command,
        detail: failure.chars().take(200).collect(),
    })
}

/// Why the package manager refused an APK, from its `Failure [CODE…]`
/// line: the code, its own words, and what the code means for a caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallFailure {
    /// `INSTALL_FAILED_…` or `INSTALL_PARSE_FAILED_…`.
    pub code: String,
    /// The text after the code (`Package a.b signatures do not match…`), if any.
    pub detail: Option<String>,
    /// Which kind of refusal it is.
    pub kind: InstallFailureKind,
}

/// The kinds of install refusal a caller acts on differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallFailureKind {
    /// The file is no valid APK for this phone (parse errors, wrong ABI,
    /// SDK too old or too new, no certificates, test-only): another file is
    /// needed.
    BadApk,
    /// The phone has another version that conflicts (downgrade, other
    /// signature, duplicate permission): uninstall it first.
    Conflict,
    /// The phone's user or policy forbids installs (user restriction,
    /// verification refused or aborted by the user).
    NotAllowed,
    /// The phone is short of space or busy: may work later.
    Transient,
    /// Any other code.
    Other,
}

impl InstallFailure {
    /// A sentence for people and models: what happened and what to do.
    pub fn explanation(&self) -> &'static str {
        match self.kind {
            InstallFailureKind::BadApk => {
                "the file is not an APK this phone can install (damaged, unsigned, or built for another Android version or processor)"
            }
            InstallFailureKind::Conflict => {
                "it conflicts with the version already installed (older, or signed by someone else): uninstall that one first"
            }
            InstallFailureKind::NotAllowed => {
                "the phone does not allow this install (a user restriction, or the install was refused on the phone)"
            }
            InstallFailureKind::Transient => {
                "the phone is short of storage or busy; free some space or try again later"
            }
            InstallFailureKind::Other => "the package manager refused the APK",
        }
    }
}

/// The refusal in `pm install`'s output, when it has a `Failure [CODE…]`
/// line (`None` for success and for output without one).
pub fn install_failure(out: &str) -> Option<InstallFailure> {
    let line = out
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("Failure ["))?;
    let inner = line.strip_prefix("Failure [")?;
    let inner = inner.strip_suffix(']').unwrap_or(inner);
    let (code, detail) = match inner.split_once(':') {
        Some((code, detail)) => (code.trim(), Some(detail.trim())),
        None => (inner.trim(), None),
    };
    if code.is_empty()
        || !code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    {
        return None;
    }
    let kind = install_failure_kind(code);
    Some(InstallFailure {
        code: code.to_owned(),
        detail: detail
            .filter(|d| !d.is_empty())
            .map(|d| d.chars().take(300).collect()),
        kind,
    })
}

fn install_failure_kind(code: &str) -> InstallFailureKind {
    use InstallFailureKind::*;
    if code.starts_with("INSTALL_PARSE_FAILED") {
        return BadApk;
    }
    match code.strip_prefix("INSTALL_FAILED_").unwrap_or(code) {
        "INVALID_APK"
        | "INVALID_URI"
        | "OLDER_SDK"
        | "NEWER_SDK"
        | "NO_MATCHING_ABIS"
        | "CPU_ABI_INCOMPATIBLE"
        | "TEST_ONLY"
        | "MISSING_SHARED_LIBRARY"
        | "MISSING_FEATURE"
        | "DEPRECATED_SDK_VERSION"
        | "BAD_SIGNATURE"
        | "INVALID_INSTALL_LOCATION"
        | "BAD_DEX_METADATA" => BadApk,
        "VERSION_DOWNGRADE"
        | "UPDATE_INCOMPATIBLE"
        | "ALREADY_EXISTS"
        | "DUPLICATE_PACKAGE"
        | "DUPLICATE_PERMISSION"
        | "SHARED_USER_INCOMPATIBLE"
        | "CONFLICTING_PROVIDER"
        | "REPLACE_COULDNT_DELETE"
        | "PERMISSION_MODEL_DOWNGRADE" => Conflict,
        "USER_RESTRICTED"
        | "VERIFICATION_FAILURE"
        | "VERIFICATION_TIMEOUT"
        | "ABORTED"
        | "SESSION_INVALID"
        | "INSTANT_APP_INVALID" => NotAllowed,
        "INSUFFICIENT_STORAGE"
        | "MEDIA_UNAVAILABLE"
        | "CONTAINER_ERROR"
        | "PACKAGE_CHANGED"
        | "UID_CHANGED" => Transient,
        _ => Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_failures_are_parsed_into_code_detail_and_kind() {
        let f = install_failure(
            "Performing Streamed Install\nFailure [INSTALL_FAILED_UPDATE_INCOMPATIBLE: Package a.b signatures do not match previously installed version; ignoring!]\n",
        )
        .unwrap();
        assert_eq!(f.code, "INSTALL_FAILED_UPDATE_INCOMPATIBLE");
        assert_eq!(
            f.detail.as_deref(),
            Some("Package a.b signatures do not match previously installed version; ignoring!")
        );
        assert_eq!(f.kind, InstallFailureKind::Conflict);
        let f = install_failure("Failure [INSTALL_FAILED_INSUFFICIENT_STORAGE]").unwrap();
        assert_eq!((f.detail, f.kind), (None, InstallFailureKind::Transient));
        let f = install_failure(
            "Failure [INSTALL_PARSE_FAILED_NOT_APK: Failed to parse /data/local/tmp/x.apk: Failed to load asset path /data/local/tmp/x.apk]",
        )
        .unwrap();
        assert_eq!(f.kind, InstallFailureKind::BadApk);
        assert_eq!(
            install_failure("Failure [INSTALL_FAILED_VERSION_DOWNGRADE]")
                .unwrap()
                .kind,
            InstallFailureKind::Conflict
        );
        assert_eq!(
            install_failure("Failure [INSTALL_FAILED_USER_RESTRICTED: Install canceled by user]")
                .unwrap()
                .kind,
            InstallFailureKind::NotAllowed
        );
        assert_eq!(
            install_failure("Failure [INSTALL_FAILED_SOMETHING_NEW]")
                .unwrap()
                .kind,
            InstallFailureKind::Other
        );
        assert_eq!(install_failure("Success\n"), None);
        assert_eq!(install_failure("Failure [oops; rm -rf]"), None);
    }

    #[test]
    fn success_and_failures() {
        assert!(pm_outcome("pm install", "Performing Streamed Install\nSuccess\n").is_ok());
        assert!(pm_outcome("pm clear", "Success\n").is_ok());
        let err = pm_outcome(
            "pm install",
            "Failure [INSTALL_FAILED_UPDATE_INCOMPATIBLE: Package a.b signatures do not match previously installed version; ignoring!]\n",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("INSTALL_FAILED_UPDATE_INCOMPATIBLE"),
            "{err}"
        );
        let err =
            pm_outcome("pm uninstall", "Failure [DELETE_FAILED_INTERNAL_ERROR]\n").unwrap_err();
        assert!(
            err.to_string().contains("DELETE_FAILED_INTERNAL_ERROR"),
            "{err}"
        );
        assert!(pm_outcome("pm clear", "Failed\n").is_err());
        assert!(pm_outcome("pm clear", "").is_err());
    }
}
