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
//!
//! Files in a directory another user controls — `sudo droidwarden mqtt-user
//! add` writing the users file in the service user's state directory —
//! are written by [`write_file`] and read by [`read_file`]: every name is
//! resolved relative to one held directory descriptor, a temporary file is
//! created exclusively under a random name (`O_EXCL|O_NOFOLLOW`, so a
//! planted link or file makes the write fail instead of redirecting it),
//! handed to the directory's owner, then renamed over the target (a rename
//! replaces a link, it never follows one); a read refuses links, anything
//! but a regular file, and files with other hard links. The daemon itself
//! refuses a state directory owned by another user ([`check_owner`]), so
//! it never writes as one user where another one decides what is there.

use rustix::fs::{AtFlags, Mode, OFlags};
use std::io::{self, Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::Path;

/// Owner-only permissions for everything the process creates from now on.
pub fn restrict_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Create `dir` (and missing parents) with mode 0700; an existing `dir`
/// that others can read, write or enter is narrowed to 0700. Parents that
/// exist are left as they are (`/var/lib` is not ours).
///
/// # Errors
/// The directory cannot be created or its mode cannot be changed (not
/// ours, read-only file system).
pub fn state_dir(dir: &Path) -> io::Result<()> {
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

/// A state directory owned by another user than the one running: the
/// process would write where that user decides what is there (a planted
/// link turns "write my database" into "overwrite any file I may write").
///
/// # Errors
/// [`io::ErrorKind::PermissionDenied`], naming the owner and what to do.
pub fn check_owner(dir: &Path) -> io::Result<()> {
    let owner = std::fs::metadata(dir)?.uid();
    let me = rustix::process::geteuid().as_raw();
    if owner == me {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} belongs to uid {owner}, not to uid {me} running the daemon: run it as that user \
             (the systemd unit does; by hand: sudo -u '#{owner}' droidwarden daemon) or set \
             [daemon] state_dir to a directory of your own",
            dir.display()
        ),
    ))
}

/// The directory `path` is in, opened once: every later step names files
/// relative to it, so swapping a path component cannot redirect them.
fn open_dir(path: &Path) -> io::Result<(OwnedFd, &std::ffi::OsStr)> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let fd = rustix::fs::open(
        dir,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok((fd, name))
}

/// `bytes` as lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// 64 random bits as hex: a temporary name nobody can plant ahead.
fn random_hex() -> io::Result<String> {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 8];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| io::Error::other("the system's random generator failed"))?;
    Ok(hex(&bytes))
}

/// Replaces `path` with `bytes`, atomically and durably, mode 0600, owned
/// by the owner of its directory (when the caller is root and the
/// directory another user's, the file is handed to that user, so the
/// daemon can still read it). The directory must exist.
///
/// The temporary file is created exclusively under a random name and
/// never through a link; the target is replaced by `rename`, which
/// replaces a link rather than following it.
///
/// # Errors
/// The file cannot be created, written or renamed (a name planted where
/// the temporary file goes is an error, never followed).
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, name) = open_dir(path)?;
    let tmp = format!(".{}.tmp-{}", name.to_string_lossy(), random_hex()?);
    let fd = rustix::fs::openat(
        &dir,
        tmp.as_str(),
        OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let write = || -> io::Result<()> {
        let mut file = std::fs::File::from(fd);
        // The mode above is filtered by the umask; this is not.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        let owner = rustix::fs::fstat(&dir)?;
        let ours = file.metadata()?;
        if (owner.st_uid, owner.st_gid) != (ours.uid(), ours.gid()) {
            // Our own fresh inode: handing it over cannot touch another file.
            std::os::unix::fs::fchown(&file, Some(owner.st_uid), Some(owner.st_gid))?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        rustix::fs::renameat(&dir, tmp.as_str(), &dir, name)?;
        rustix::fs::fsync(&dir)?;
        Ok(())
    };
    write().inspect_err(|_| {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
    })
}

/// Reads `path` if it exists (`None` when it does not), at most `limit`
/// bytes. Never through a link, never a device or FIFO (which could
/// block), never a file with other hard links (one planted to make the
/// reader read someone else's file).
///
/// # Errors
/// The file is a link, not a regular file, has other links, is larger
/// than `limit`, or cannot be read.
pub fn read_file(path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let (dir, name) = match open_dir(path) {
        Ok(opened) => opened,
        // No directory, so no file.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let fd = match rustix::fs::openat(
        &dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::LOOP) => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is a symbolic link; refusing to follow it",
                    path.display()
                ),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let file = std::fs::File::from(fd);
    let meta = file.metadata()?;
    // Refused, not damaged: something was put where the file belongs.
    let refuse = |why: &str| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} {why}; refusing to read it", path.display()),
        ))
    };
    if !meta.file_type().is_file() {
        return refuse("is not a regular file");
    }
    if meta.nlink() > 1 {
        return refuse("has other hard links");
    }
    if meta.len() > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is larger than {limit} bytes", path.display()),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit + 1).read_to_end(&mut bytes)?;
    Ok(Some(bytes))
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

    #[test]
    fn a_write_replaces_the_file_and_never_follows_a_planted_link() {
        let base = tempfile::tempdir().unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "root's file").unwrap();
        let target = base.path().join("users.json");
        // A link where the file goes is replaced, not followed.
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        write_file(&target, b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's file");
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert!(!std::fs::symlink_metadata(&target).unwrap().is_symlink());
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // No temporary file is left behind, and names a planter could
        // guess (the old `.<name>.tmp-<pid>`) are not used.
        let names: Vec<_> = std::fs::read_dir(base.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let pid_tmp = base
            .path()
            .join(format!(".users.json.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &pid_tmp).unwrap();
        write_file(&target, b"newer").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's file");
        assert_eq!(std::fs::read(&target).unwrap(), b"newer");
    }

    #[test]
    fn a_read_refuses_links_fifos_and_hard_links() {
        let base = tempfile::tempdir().unwrap();
        let secret = base.path().join("secret");
        std::fs::write(&secret, "shadow").unwrap();
        let link = base.path().join("link.json");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        assert!(read_file(&link, 1024).is_err());
        let hard = base.path().join("hard.json");
        std::fs::hard_link(&secret, &hard).unwrap();
        assert!(read_file(&hard, 1024).is_err());
        let fifo = base.path().join("fifo.json");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        // Refused at once: a FIFO would block the reader forever.
        assert!(read_file(&fifo, 1024).is_err());
        assert_eq!(read_file(&base.path().join("none"), 1024).unwrap(), None);
        assert_eq!(
            read_file(&base.path().join("no-dir/none"), 1024).unwrap(),
            None
        );
        let big = base.path().join("big");
        std::fs::write(&big, vec![b'x'; 2048]).unwrap();
        assert!(read_file(&big, 1024).is_err());
        let fine = base.path().join("fine");
        std::fs::write(&fine, "ok").unwrap();
        assert_eq!(read_file(&fine, 1024).unwrap().unwrap(), b"ok");
    }

    #[test]
    fn a_state_directory_of_another_user_is_refused() {
        let base = tempfile::tempdir().unwrap();
        check_owner(base.path()).unwrap();
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(base.path(), Some(65534), Some(65534)).unwrap();
            let e = check_owner(base.path()).unwrap_err();
            assert!(e.to_string().contains("uid 65534"), "{e}");
        }
    }
}
