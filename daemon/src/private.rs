//! Files the daemon writes are private to it, whatever the umask it was
//! started with: the state directory holds session transcripts, approval
//! requests, the MQTT credentials and the command history.
//!
//! Under systemd the unit's `UMask=0077` and `StateDirectoryMode=0700`
//! already say so; started by hand (a root shell's umask is usually 022),
//! nothing did. [`restrict_umask`] makes every file and directory created
//! from then on — by us, SQLite or any library — owner-only, and
//! [`state_dir`] creates the state directory 0700 or tightens an existing
//! one that is wider.

use std::io;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::Path;

/// Owner-only permissions for everything the process creates from now on.
pub(crate) fn restrict_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Create `dir` (and missing parents) with mode 0700; an existing `dir`
/// that others can read, write or enter is narrowed to 0700. Parents that
/// exist are left as they are (`/var/lib` is not ours).
///
/// # Errors
/// The directory cannot be created or its mode cannot be changed (not
/// ours, read-only file system).
pub(crate) fn state_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", dir.display()),
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        tracing::info!(dir = %dir.display(), "state directory was readable by others; now 0700");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_directory_is_created_or_narrowed_to_0700() {
        let base = tempfile::tempdir().unwrap();
        let fresh = base.path().join("a/b/state");
        state_dir(&fresh).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&fresh), 0o700);
        let wide = base.path().join("wide");
        std::fs::create_dir(&wide).unwrap();
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o755)).unwrap();
        state_dir(&wide).unwrap();
        assert_eq!(mode(&wide), 0o700);
        let file = base.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(state_dir(&file).is_err());
    }
}
