//! The `files` service over ADB: `files.pull` reads a file as base64
//! through the shell, bounded by [`MAX_PULL_BYTES`]; `files.push` is in
//! `transfer.rs`.

use super::*;
use droidwarden_services::{ErrorCode, FilePulled, FilesAction, plain_absolute_path};

/// The largest file `files.pull` returns (before base64).
pub const MAX_PULL_BYTES: u64 = 1024 * 1024;

pub(super) async fn run(sh: &dyn Shell, action: &FilesAction) -> Result<Value, BridgeError> {
    let path = match action {
        FilesAction::Pull { path } => path,
        push @ FilesAction::Push { .. } => return super::transfer::push(sh, push).await,
    };
    if !plain_absolute_path(path) {
        return Err(refused(
            ErrorCode::InvalidParams,
            format!("{path:?}: paths must be absolute, without empty, . or .. parts"),
        ));
    }
    let stat = ["stat", "-L", "-c", "%s %F", path.as_str()];
    let out = ok(sh, &stat).await.map_err(|e| match e {
        BridgeError::Device { message, .. } if message.contains("No such file") => {
            BridgeError::NotFound {
                message: format!("{path}: no such file on the phone"),
            }
        }
        other => other,
    })?;
    let (size, kind) = out.trim().split_once(' ').unwrap_or((out.trim(), ""));
    let size: u64 = size.parse().map_err(|_| BridgeError::UnexpectedOutput {
        command: stat.join(" "),
        detail: format!("not a size: `{}`", parse::excerpt(&out)),
    })?;
    if !kind.starts_with("regular") {
        return Err(refused(
            ErrorCode::InvalidParams,
            format!("{path} is a {kind}, not a regular file"),
        ));
    }
    if size > MAX_PULL_BYTES {
        return Err(refused(
            ErrorCode::Denied,
            format!("{path} has {size} bytes; files.pull returns at most {MAX_PULL_BYTES}"),
        ));
    }
    let argv = ["base64", "-w", "0", path.as_str()];
    let encoded: String = ok(sh, &argv)
        .await?
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let decoded = parsed(sh.device_name(), &argv, base64_len(&encoded))?;
    if decoded as u64 > MAX_PULL_BYTES {
        return Err(refused(
            ErrorCode::Denied,
            format!("{path} grew past {MAX_PULL_BYTES} bytes while it was read"),
        ));
    }
    answer(FilePulled {
        path: path.clone(),
        size_bytes: decoded as u64,
        content_base64: encoded,
    })
}

/// The number of bytes a standard base64 text encodes.
fn base64_len(text: &str) -> Result<usize, parse::ParseError> {
    let valid = text.len().is_multiple_of(4)
        && text
            .trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        && text.len() - text.trim_end_matches('=').len() <= 2;
    if !valid {
        return Err(parse::ParseError::Malformed {
            command: "base64",
            detail: "the output is not standard base64".into(),
        });
    }
    let pad = text.len() - text.trim_end_matches('=').len();
    Ok(text.len() / 4 * 3 - pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_len("").unwrap(), 0);
        assert_eq!(base64_len("aGk=").unwrap(), 2);
        assert_eq!(base64_len("aGVsbG8=").unwrap(), 5);
        assert_eq!(base64_len("aGVs").unwrap(), 3);
        assert!(base64_len("aGk").is_err());
        assert!(base64_len("a$k=").is_err());
        assert!(base64_len("a===").is_err());
    }
}
