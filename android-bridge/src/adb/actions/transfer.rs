//! Files sent to the phone: `files.push` and `app_manager.install
//! {host_path}`. The bytes go through the transport's file service
//! ([`Shell::push`]: the adb `sync:` protocol), never through a command
//! line; a file of the daemon's machine is opened here, after the checks
//! that need the file system (symbolic links resolved, the size read from
//! the open file), and streamed, so an APK is never held in memory whole.

use super::{Shell, answer, parse};
use crate::error::BridgeError;
use droidwarden_services::{
    AppInstalled, ErrorCode, FilePushed, FilesAction, HostFiles, MAX_INLINE_PUSH_BYTES, WireError,
    check_push_shape, plain_absolute_path,
};
use serde_json::Value;
use std::path::Path;
#[cfg(test)]
use std::path::PathBuf;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Where an APK from the daemon's machine is put while it is installed:
/// the one directory every Android release lets the shell user write and
/// the package manager read.
pub const INSTALL_TEMP_DIR: &str = "/data/local/tmp";

/// One file for [`Shell::push`].
pub struct PushFile<'a> {
    /// Its absolute path on the phone.
    pub remote: &'a str,
    /// Permission bits (`0o644`).
    pub permissions: u32,
    /// The bytes.
    pub data: &'a mut (dyn AsyncRead + Unpin + Send),
    /// The most bytes `data` may yield (a file that grows while it is read
    /// is refused and no file is left on the phone).
    pub max: u64,
    /// Replace a file already at `remote`.
    pub replace: bool,
}

impl std::fmt::Debug for PushFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushFile")
            .field("remote", &self.remote)
            .field("permissions", &format_args!("{:o}", self.permissions))
            .field("max", &self.max)
            .field("replace", &self.replace)
            .finish_non_exhaustive()
    }
}

/// What [`Shell::push`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// The file was written.
    Written {
        /// Its size.
        bytes: u64,
        /// Whether a file was there before.
        replaced: bool,
    },
    /// Nothing was written: something is already at the path.
    Exists {
        /// Whether that is a directory.
        is_dir: bool,
    },
}

fn refused(code: ErrorCode, message: impl Into<String>) -> BridgeError {
    BridgeError::Refused(WireError::new(code, message))
}

fn no_host_files(sh: &dyn Shell) -> BridgeError {
    refused(
        ErrorCode::UnsupportedAction,
        format!(
            "{}: files of the daemon's machine cannot be sent over this transport; send the content in the parameters (text or content_base64) instead",
            sh.device_name()
        ),
    )
}

/// Open `path` on the daemon's machine for sending, if `host` allows it:
/// textually inside one of its directories, still inside one once every
/// symbolic link is resolved, a regular file, and at most `max` bytes.
/// Returns the open file, limited to `max + 1` bytes, and its size.
///
/// # Errors
/// `denied` outside the directories or over `max`, `invalid_params` for
/// something that is no regular file, `not_found` for a missing file.
pub async fn open_host_file(
    host: &HostFiles,
    path: &str,
    max: u64,
) -> Result<(tokio::io::Take<tokio::fs::File>, u64), BridgeError> {
    if !plain_absolute_path(path) {
        return Err(refused(
            ErrorCode::InvalidParams,
            format!("{path:?}: host paths must be absolute, without empty, . or .. parts"),
        ));
    }
    if !host.allows(path) {
        return Err(refused(
            ErrorCode::Denied,
            format!(
                "{path} is outside the host directories this daemon allows ([phone_services] host_dirs)"
            ),
        ));
    }
    let resolved = tokio::fs::canonicalize(path)
        .await
        .map_err(|e| host_io_error(path, &e))?;
    let mut inside = false;
    for dir in &host.dirs {
        if let Ok(dir) = tokio::fs::canonicalize(dir).await
            && strictly_inside(&resolved, &dir)
        {
            inside = true;
            break;
        }
    }
    if !inside {
        return Err(refused(
            ErrorCode::Denied,
            format!(
                "{path} leads outside the host directories this daemon allows (a symbolic link)"
            ),
        ));
    }
    // Not a regular file (a FIFO would block the open until a writer comes):
    // refused before it is opened.
    let before = tokio::fs::metadata(&resolved)
        .await
        .map_err(|e| host_io_error(path, &e))?;
    if !before.is_file() {
        return Err(refused(
            ErrorCode::InvalidParams,
            format!("{path} is not a regular file"),
        ));
    }
    let file = tokio::fs::File::open(&resolved)
        .await
        .map_err(|e| host_io_error(path, &e))?;
    // The size of the file opened, not of whatever the path names now.
    let meta = file.metadata().await.map_err(|e| host_io_error(path, &e))?;
    if !meta.is_file() {
        return Err(refused(
            ErrorCode::InvalidParams,
            format!("{path} is not a regular file"),
        ));
    }
    if meta.len() > max {
        return Err(refused(
            ErrorCode::Denied,
            format!(
                "{path} has {} bytes; this daemon sends at most {max} ([phone_services] max_push_bytes / max_apk_bytes)",
                meta.len()
            ),
        ));
    }
    Ok((file.take(max.saturating_add(1)), meta.len()))
}

fn strictly_inside(path: &Path, dir: &Path) -> bool {
    path.strip_prefix(dir)
        .is_ok_and(|rest| rest.components().next().is_some())
}

fn host_io_error(path: &str, e: &std::io::Error) -> BridgeError {
    match e.kind() {
        std::io::ErrorKind::NotFound => BridgeError::NotFound {
            message: format!("{path}: no such file on the daemon's machine"),
        },
        std::io::ErrorKind::PermissionDenied => BridgeError::PermissionDenied {
            message: format!("{path}: the daemon may not read this file"),
        },
        _ => refused(ErrorCode::Internal, format!("{path}: {e}")),
    }
}

/// `files.push`.
pub(super) async fn push(sh: &dyn Shell, action: &FilesAction) -> Result<Value, BridgeError> {
    let FilesAction::Push {
        path,
        text,
        content_base64,
        host_path,
        overwrite,
    } = action
    else {
        return Err(BridgeError::Internal(
            "push called for another action".into(),
        ));
    };
    if !plain_absolute_path(path) {
        return Err(refused(
            ErrorCode::InvalidParams,
            format!("{path:?}: paths must be absolute, without empty, . or .. parts"),
        ));
    }
    check_push_shape(action).map_err(BridgeError::Refused)?;
    let limit = sh
        .host_files()
        .map_or(MAX_INLINE_PUSH_BYTES as u64, |h| h.max_push_bytes);
    let replace = overwrite.unwrap_or(false);
    let pushed = match (text, content_base64, host_path) {
        (Some(text), _, _) => push_bytes(sh, path, text.as_bytes(), limit, replace).await?,
        (_, Some(b64), _) => {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| {
                    refused(
                        ErrorCode::InvalidParams,
                        format!("content_base64 is not standard base64: {e}"),
                    )
                })?;
            push_bytes(sh, path, &bytes, limit, replace).await?
        }
        (_, _, Some(host)) => {
            let files = sh.host_files().ok_or_else(|| no_host_files(sh))?;
            let (mut file, _) = open_host_file(files, host, files.max_push_bytes).await?;
            sh.push(PushFile {
                remote: path,
                permissions: 0o644,
                data: &mut file,
                max: files.max_push_bytes,
                replace,
            })
            .await?
        }
        // check_push_shape has refused this already.
        _ => {
            return Err(refused(
                ErrorCode::InvalidParams,
                "push needs exactly one of text, content_base64 and host_path",
            ));
        }
    };
    match pushed {
        Pushed::Written { bytes, replaced } => answer(FilePushed {
            path: path.clone(),
            size_bytes: bytes,
            replaced,
        }),
        Pushed::Exists { is_dir: true } => Err(refused(
            ErrorCode::InvalidParams,
            format!("{path} is a directory on the phone; name the file inside it"),
        )),
        Pushed::Exists { is_dir: false } => Err(refused(
            ErrorCode::Denied,
            format!("{path} already exists on the phone; push with overwrite: true to replace it"),
        )),
    }
}

async fn push_bytes(
    sh: &dyn Shell,
    path: &str,
    bytes: &[u8],
    limit: u64,
    replace: bool,
) -> Result<Pushed, BridgeError> {
    if bytes.len() as u64 > limit {
        return Err(refused(
            ErrorCode::Denied,
            format!(
                "the content has {} bytes; this daemon pushes at most {limit} ([phone_services] max_push_bytes)",
                bytes.len()
            ),
        ));
    }
    let mut data = bytes;
    sh.push(PushFile {
        remote: path,
        permissions: 0o644,
        data: &mut data,
        max: limit,
        replace,
    })
    .await
}

/// A name in [`INSTALL_TEMP_DIR`] no other install uses.
fn temp_apk_path() -> String {
    format!(
        "{INSTALL_TEMP_DIR}/droidwarden-{}.apk",
        droidwarden_services::unique_suffix()
    )
}

/// `app_manager.install {host_path}`: send the APK to [`INSTALL_TEMP_DIR`],
/// `pm install` it, and remove it from the phone whatever the outcome.
pub(super) async fn install_from_host(
    sh: &dyn Shell,
    host_path: &str,
) -> Result<Value, BridgeError> {
    let files = sh.host_files().ok_or_else(|| no_host_files(sh))?;
    if !host_path.ends_with(".apk") {
        return Err(refused(
            ErrorCode::InvalidParams,
            "host_path must name an .apk file",
        ));
    }
    let (mut file, _) = open_host_file(files, host_path, files.max_apk_bytes).await?;
    let temp = temp_apk_path();
    let pushed = sh
        .push(PushFile {
            remote: &temp,
            permissions: 0o644,
            data: &mut file,
            max: files.max_apk_bytes,
            replace: false,
        })
        .await;
    let outcome = match pushed {
        Ok(Pushed::Written { .. }) => install(sh, &temp).await,
        Ok(Pushed::Exists { .. }) => {
            // Another file of that name: not ours, so not removed either.
            return Err(BridgeError::Internal(format!(
                "{temp} already exists on the phone"
            )));
        }
        Err(e) => Err(e),
    };
    // Whatever happened (a push cut short leaves nothing, but a phone
    // that kept part of it is not trusted to have removed it).
    let removed = sh.run(&["rm", "-f", &temp]).await;
    match &removed {
        Ok(out) if out.exit == 0 => {}
        Ok(out) => {
            tracing::warn!(device = sh.device_name(), path = %temp, stderr = %out.stderr.trim(), "cannot remove the temporary APK")
        }
        Err(e) => {
            tracing::warn!(device = sh.device_name(), path = %temp, error = %e, "cannot remove the temporary APK")
        }
    }
    outcome?;
    answer(AppInstalled {
        apk_path: host_path.to_owned(),
        from_host: true,
        installed: true,
    })
}

/// `pm install -r PATH`, its refusals as structured errors.
pub(super) async fn install(sh: &dyn Shell, apk: &str) -> Result<(), BridgeError> {
    let argv = ["pm", "install", "-r", apk];
    let out = sh.run(&argv).await?;
    if let Some(failure) = parse::install_failure(&out.stdout) {
        return Err(install_refused(&failure));
    }
    super::app_manager::pm_result(sh, "pm install", &argv, &out)
}

/// The wire error of a `pm install` refusal: the code keeps the package
/// manager's, the error code says what the caller can do about it.
pub(crate) fn install_refused(f: &parse::InstallFailure) -> BridgeError {
    use parse::InstallFailureKind as K;
    let (code, retryable) = match f.kind {
        K::BadApk => (ErrorCode::InvalidParams, false),
        K::Conflict => (ErrorCode::Denied, false),
        K::NotAllowed => (ErrorCode::PermissionDenied, false),
        K::Transient => (ErrorCode::DeviceError, true),
        K::Other => (ErrorCode::DeviceError, false),
    };
    let detail = f
        .detail
        .as_deref()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default();
    BridgeError::Refused(WireError {
        code,
        message: format!(
            "the phone refused the APK: {}{detail}: {}",
            f.code,
            f.explanation()
        ),
        retryable,
        details: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary directory.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "dw-transfer-{name}-{}",
            droidwarden_services::unique_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn code(e: &BridgeError) -> ErrorCode {
        e.to_wire().code
    }

    #[tokio::test]
    async fn host_files_are_opened_only_inside_the_directories_and_bounds() {
        let root = scratch("open");
        let share = root.join("share");
        std::fs::create_dir_all(share.join("sub")).unwrap();
        std::fs::write(share.join("sub/ok.txt"), b"hello").unwrap();
        std::fs::write(root.join("secret"), b"no").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), share.join("link")).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(share.join("pipe"))
            .status()
            .is_ok_and(|s| s.success());
        let host = HostFiles {
            dirs: vec![share.to_str().unwrap().to_owned()],
            ..HostFiles::default()
        };
        let at = |p: &str| format!("{}/{p}", share.display());
        let (mut file, size) = open_host_file(&host, &at("sub/ok.txt"), 5).await.unwrap();
        assert_eq!(size, 5);
        let mut got = Vec::new();
        file.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hello");
        for (path, want) in [
            (at("sub/ok.txt"), ErrorCode::Denied), // over a bound of 4
            (at("link"), ErrorCode::Denied),       // a link leading out
            (at("sub"), ErrorCode::InvalidParams), // a directory
            (at("none"), ErrorCode::NotFound),
            (at("sub/../../secret"), ErrorCode::InvalidParams),
            (format!("{}/secret", root.display()), ErrorCode::Denied),
        ] {
            let err = open_host_file(&host, &path, 4).await.unwrap_err();
            assert_eq!(code(&err), want, "{path}: {err}");
        }
        if fifo {
            // Refused at once, not left waiting for a writer.
            let err = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                open_host_file(&host, &at("pipe"), 4),
            )
            .await
            .expect("no wait on a FIFO")
            .unwrap_err();
            assert_eq!(code(&err), ErrorCode::InvalidParams, "{err}");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn install_refusals_say_what_to_do() {
        let f = parse::install_failure("Failure [INSTALL_FAILED_VERSION_DOWNGRADE]").unwrap();
        let wire = install_refused(&f).to_wire();
        assert_eq!(wire.code, ErrorCode::Denied);
        assert!(wire.message.contains("INSTALL_FAILED_VERSION_DOWNGRADE"));
        assert!(wire.message.contains("uninstall"), "{}", wire.message);
        let f = parse::install_failure("Failure [INSTALL_FAILED_INSUFFICIENT_STORAGE]").unwrap();
        assert!(install_refused(&f).to_wire().retryable);
    }

    #[test]
    fn temporary_names_differ() {
        let (a, b) = (temp_apk_path(), temp_apk_path());
        assert_ne!(a, b);
        assert!(a.starts_with("/data/local/tmp/droidwarden-") && a.ends_with(".apk"));
    }
}
