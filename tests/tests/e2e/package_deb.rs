//! The Debian package, end to end: `scripts/package-deb` run on the debug
//! binary, the `.deb` read back with `dpkg-deb` (control fields, files and
//! their modes, the conffile, the maintainer scripts), its units checked
//! with `systemd-analyze verify`, and, as root, installed, upgraded,
//! removed and purged in a throwaway root with `dpkg --root` and
//! chroot-less maintainer scripts (`DPKG_ROOT`), which never touch this
//! machine's own services or users.
//!
//! The package is built once, uncompressed, into `CARGO_TARGET_TMPDIR`
//! (a compressed build of the debug binary would take most of the time);
//! each test reads it into a temporary directory of its own.

use droidwarden_e2e::{binary, is_root, run_with_timeout};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The package's version: the workspace's, with Cargo's pre-release
/// hyphen as Debian's tilde (`1.0.0-rc.1` → `1.0.0~rc.1`).
fn debian_version() -> String {
    env!("CARGO_PKG_VERSION").replacen('-', "~", 1)
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `program` with `args`, panicking with its output when it fails.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("{program}: {e} (apt-get install dpkg dpkg-dev; scripts/test does it)")
        });
    assert!(out.status.success(), "{program} {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `scripts/package-deb` on the debug binary into `out`; `env` is added
/// to its environment. Returns the `.deb` it printed.
fn build(out: &Path, env: &[(&str, &str)]) -> PathBuf {
    let mut cmd = Command::new(workspace().join("scripts/package-deb"));
    cmd.arg("--binary")
        .arg(binary("droidwarden"))
        .arg("--out")
        .arg(out)
        .args(["--compression", "none"]);
    for (key, value) in env {
        cmd.env(key, value);
    }
    let output = run_with_timeout(cmd, Duration::from_secs(120));
    assert!(output.status.success(), "package-deb: {}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let deb = PathBuf::from(stdout.trim_end().lines().last().expect("the .deb's path"));
    assert_eq!(
        deb.file_name().and_then(|n| n.to_str()),
        Some(
            format!(
                "droidwarden_{}_{}.deb",
                debian_version(),
                run("dpkg", &["--print-architecture"]).trim()
            )
            .as_str()
        ),
        "{stdout}"
    );
    deb
}

/// The package built with the default tools, shared by the tests.
fn package() -> &'static Path {
    static DEB: OnceLock<PathBuf> = OnceLock::new();
    DEB.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("package-deb");
        let _ = std::fs::remove_dir_all(&out);
        build(&out, &[])
    })
}

/// The control file's fields (continuation lines joined with `\n`).
fn fields(deb: &Path) -> Vec<(String, String)> {
    let control = run("dpkg-deb", &["--field", deb.to_str().unwrap()]);
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in control.lines() {
        if let Some(more) = line.strip_prefix(' ') {
            let last = fields.last_mut().expect("a field before its continuation");
            last.1.push('\n');
            last.1.push_str(more);
        } else if let Some((key, value)) = line.split_once(": ") {
            fields.push((key.to_owned(), value.to_owned()));
        }
    }
    fields
}

fn field<'a>(fields: &'a [(String, String)], key: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {key} in {fields:?}"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// The units' `ExecStart=` program.
fn exec_start(unit: &str) -> &str {
    unit.lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .and_then(|l| l.split_whitespace().next())
        .expect("an ExecStart= line")
}

/// `systemd-analyze verify` on a packaged unit, run from a copy whose
/// `ExecStart=` points into the extracted package (verify checks that the
/// program exists and is executable; `--root` would want a whole system).
fn verify(unit: &Path, extracted: &Path, user: bool) {
    let text = read(unit);
    let program = exec_start(&text);
    let inside = extracted.join(program.trim_start_matches('/'));
    assert_eq!(mode(&inside), 0o755, "{program} in the package");
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = dir.path().join("droidwarden.service");
    std::fs::write(
        &copy,
        text.replace(
            &format!("ExecStart={program} "),
            &format!("ExecStart={} ", inside.display()),
        ),
    )
    .expect("write the unit copy");
    let copy = copy.to_str().unwrap();
    let runtime = tempfile::tempdir().expect("runtime dir");
    let (ok, out) = if user {
        super::systemd::systemd_analyze(
            &["--user", "verify", "--man=no", copy],
            &[("XDG_RUNTIME_DIR", runtime.path())],
        )
    } else {
        super::systemd::systemd_analyze(&["verify", "--man=no", copy], &[])
    };
    assert!(ok && out.trim().is_empty(), "{}: {out}", unit.display());
}

#[test]
fn the_package_holds_the_service_its_files_and_its_scripts() {
    let deb = package();
    let deb_str = deb.to_str().unwrap();

    // The control fields.
    let fields = fields(deb);
    assert_eq!(field(&fields, "Package"), "droidwarden");
    assert_eq!(field(&fields, "Version"), debian_version());
    assert_eq!(
        field(&fields, "Architecture"),
        run("dpkg", &["--print-architecture"]).trim()
    );
    let depends = field(&fields, "Depends");
    assert!(depends.starts_with("libc6 (>= 2."), "{depends}");
    assert!(
        depends.contains("systemd | systemd-sysusers, systemd | systemd-tmpfiles"),
        "{depends}"
    );
    assert_eq!(field(&fields, "Recommends"), "adb");
    assert!(field(&fields, "Maintainer").contains('@'));
    let size: u64 = field(&fields, "Installed-Size").parse().expect("KiB");
    assert!(size > 1024, "{size} KiB");

    // The maintainer scripts and the conffile.
    let control = tempfile::tempdir().expect("temp dir");
    run(
        "dpkg-deb",
        &["--control", deb_str, control.path().to_str().unwrap()],
    );
    for script in ["postinst", "prerm", "postrm"] {
        let path = control.path().join(script);
        assert_eq!(mode(&path), 0o755, "{script}");
        assert!(read(&path).starts_with("#!/bin/sh\n"), "{script}");
        run("sh", &["-n", path.to_str().unwrap()]);
    }
    assert_eq!(
        read(&control.path().join("conffiles")),
        "/etc/droidwarden/config.toml\n"
    );

    // Every file, its owner and mode.
    let listing = run("dpkg-deb", &["--contents", deb_str]);
    let mut files = Vec::new();
    for line in listing.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (perms, owner, path) = (words[0], words[1], words[5]);
        assert_eq!(owner, "root/root", "{line}");
        if perms.starts_with('d') {
            assert_eq!(perms, "drwxr-xr-x", "{line}");
        } else if path != "./usr/bin/droidwarden" {
            assert_eq!(perms, "-rw-r--r--", "{line}");
            files.push(path.trim_start_matches('.').to_owned());
        }
    }
    assert!(listing.contains("-rwxr-xr-x root/root"), "{listing}");
    for expected in [
        "/etc/droidwarden/config.toml",
        "/usr/lib/systemd/system/droidwarden.service",
        "/usr/lib/systemd/user/droidwarden.service",
        "/usr/lib/sysusers.d/droidwarden.conf",
        "/usr/lib/tmpfiles.d/droidwarden.conf",
        "/usr/share/dbus-1/system.d/org.droidwarden.Daemon1.conf",
        "/usr/share/man/man1/droidwarden.1.gz",
        "/usr/share/bash-completion/completions/droidwarden",
        "/usr/share/zsh/vendor-completions/_droidwarden",
        "/usr/share/fish/vendor_completions.d/droidwarden.fish",
        "/usr/share/doc/droidwarden/copyright",
        "/usr/share/doc/droidwarden/changelog.gz",
        "/usr/share/doc/droidwarden/README.md.gz",
        "/usr/share/doc/droidwarden/systemd/README.md.gz",
    ] {
        assert!(files.iter().any(|f| f == expected), "{expected}: {files:?}");
    }

    let x = tempfile::tempdir().expect("temp dir");
    let x = x.path();
    run("dpkg-deb", &["-x", deb_str, x.to_str().unwrap()]);
    let md5 = Command::new("md5sum")
        .args(["--check", "--quiet"])
        .arg(control.path().join("md5sums"))
        .current_dir(x)
        .output()
        .expect("md5sum");
    assert!(md5.status.success(), "md5sums: {}", text(&md5));

    // The binary: stripped (no line tables left), and the one built.
    let bin = x.join("usr/bin/droidwarden");
    let sections = run("readelf", &["-S", "-W", bin.to_str().unwrap()]);
    assert!(!sections.contains(".debug_line"), "{sections}");
    assert!(!sections.contains(".symtab"), "{sections}");
    assert!(bin.metadata().unwrap().len() < binary("droidwarden").metadata().unwrap().len());
    assert_eq!(
        run(bin.to_str().unwrap(), &["--version"]).trim(),
        format!("droidwarden {}", env!("CARGO_PKG_VERSION"))
    );

    // The units: the repository's, with only the binary's path changed,
    // and each verifies against the packaged binary.
    let sources = workspace().join("systemd");
    let system = x.join("usr/lib/systemd/system/droidwarden.service");
    assert_eq!(exec_start(&read(&system)), "/usr/bin/droidwarden");
    assert_eq!(
        read(&system).replace(
            "ExecStart=/usr/bin/droidwarden ",
            "ExecStart=/usr/local/bin/droidwarden "
        ),
        read(&sources.join("droidwarden.service"))
    );
    verify(&system, x, false);
    let user = x.join("usr/lib/systemd/user/droidwarden.service");
    assert_eq!(exec_start(&read(&user)), "/usr/bin/droidwarden");
    verify(&user, x, true);
    for (packaged, source) in [
        (
            "usr/lib/sysusers.d/droidwarden.conf",
            "sysusers.d/droidwarden.conf",
        ),
        (
            "usr/lib/tmpfiles.d/droidwarden.conf",
            "tmpfiles.d/droidwarden.conf",
        ),
        (
            "usr/share/dbus-1/system.d/org.droidwarden.Daemon1.conf",
            "dbus/org.droidwarden.Daemon1.conf",
        ),
    ] {
        assert_eq!(
            read(&x.join(packaged)),
            read(&sources.join(source)),
            "{packaged}"
        );
    }

    // The manual page and completions come from the binary.
    let man = run(
        "gzip",
        &[
            "-dc",
            x.join("usr/share/man/man1/droidwarden.1.gz")
                .to_str()
                .unwrap(),
        ],
    );
    assert!(man.contains(".TH droidwarden 1"), "{man}");
    for completion in [
        "usr/share/bash-completion/completions/droidwarden",
        "usr/share/zsh/vendor-completions/_droidwarden",
        "usr/share/fish/vendor_completions.d/droidwarden.fish",
    ] {
        assert!(
            read(&x.join(completion)).contains("droidwarden"),
            "{completion}"
        );
    }

    // The conffile sets nothing, and its commented settings are exactly
    // the built-in defaults.
    let config = x.join("etc/droidwarden/config.toml");
    let check = Command::new(&bin)
        .arg("--config")
        .arg(&config)
        .args(["config", "check"])
        .output()
        .expect("config check");
    assert!(check.status.success(), "{}", text(&check));
    let config = read(&config);
    let settings = config
        .split_once(" follow.\n\n")
        .expect("the header's last line")
        .1;
    assert!(
        settings.lines().all(|l| l.is_empty() || l.starts_with('#')),
        "{settings}"
    );
    let uncommented: String = settings
        .lines()
        .map(|l| match l.strip_prefix('#') {
            Some(rest) if !rest.is_empty() && !rest.starts_with(' ') => format!("{rest}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    let defaults = run(bin.to_str().unwrap(), &["config", "print-default"]);
    let defaults = defaults.split_once("\n\n").expect("the defaults' header").1;
    assert_eq!(uncommented, defaults);

    let copyright = read(&x.join("usr/share/doc/droidwarden/copyright"));
    assert!(
        copyright.starts_with(
            "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
        ),
        "{copyright}"
    );
    assert!(
        copyright.contains("License: MIT or Apache-2.0\n"),
        "{copyright}"
    );
}

/// Without dpkg-shlibdeps (dpkg-dev), Depends comes from the binary's
/// GLIBC_ and GCC_ symbol versions, and says the same.
#[test]
fn without_dpkg_shlibdeps_the_depends_are_the_same() {
    let out = tempfile::tempdir().expect("temp dir");
    let deb = build(out.path(), &[("DPKG_SHLIBDEPS", "")]);
    assert_eq!(
        field(&fields(&deb), "Depends"),
        field(&fields(package()), "Depends")
    );
}

/// Installs the package into a throwaway root (`dpkg --root`, maintainer
/// scripts run outside a chroot with `DPKG_ROOT` set), as a first
/// installation, an upgrade after the admin disabled the service and
/// edited the configuration, a removal and a purge.
#[test]
fn the_package_installs_upgrades_and_purges_in_a_scratch_root() {
    if !is_root() {
        eprintln!("not root: dpkg cannot install, even into a scratch root; skipped");
        return;
    }
    let root = tempfile::tempdir().expect("scratch root");
    let root = root.path();
    std::fs::create_dir_all(root.join("var/lib/dpkg/updates")).unwrap();
    std::fs::create_dir_all(root.join("var/lib/dpkg/info")).unwrap();
    std::fs::write(root.join("var/lib/dpkg/status"), "").unwrap();
    let dpkg = |args: &[&str]| -> String {
        let out = Command::new("dpkg")
            .arg(format!("--root={}", root.display()))
            // The host's log stays untouched; the scratch root has none of
            // the packages the package depends on.
            .args([
                "--log=/dev/null",
                "--force-script-chrootless",
                "--force-depends",
            ])
            .args(args)
            .output()
            .expect("dpkg");
        assert!(out.status.success(), "dpkg {args:?}: {}", text(&out));
        text(&out)
    };
    let deb = package().to_str().unwrap();
    let wants = root.join("etc/systemd/system/multi-user.target.wants/droidwarden.service");

    // A first installation: the user, the state directory and the secret
    // files are made, and the service is enabled.
    dpkg(&["--install", deb]);
    let passwd = read(&root.join("etc/passwd"));
    let user = passwd
        .lines()
        .find(|l| l.starts_with("droidwarden:"))
        .unwrap_or_else(|| panic!("no droidwarden user: {passwd}"));
    let uid: u32 = user.split(':').nth(2).unwrap().parse().unwrap();
    let state = root.join("var/lib/droidwarden");
    assert_eq!(
        (state.metadata().unwrap().uid(), mode(&state)),
        (uid, 0o700)
    );
    for secret in ["mqtt-password", "llm-api-key"] {
        let path = root.join("etc/droidwarden").join(secret);
        assert_eq!((path.metadata().unwrap().uid(), mode(&path)), (0, 0o600));
    }
    assert_eq!(
        std::fs::read_link(&wants).expect("enabled"),
        Path::new("/usr/lib/systemd/system/droidwarden.service")
    );
    assert_eq!(mode(&root.join("usr/bin/droidwarden")), 0o755);

    // The admin disables the service and changes the configuration; an
    // upgrade keeps both.
    run(
        "systemctl",
        &[
            &format!("--root={}", root.display()),
            "disable",
            "droidwarden.service",
        ],
    );
    assert!(!wants.exists());
    let config = root.join("etc/droidwarden/config.toml");
    let edited = format!("{}[calls]\ntimeout_ms = 20000\n", read(&config));
    std::fs::write(&config, &edited).unwrap();
    std::fs::write(state.join("mqtt-users.json"), "{}").unwrap();
    dpkg(&["--install", deb]);
    assert!(!wants.exists(), "an upgrade does not enable it again");
    assert_eq!(read(&config), edited);

    // Removal keeps the configuration and the state.
    dpkg(&["--remove", "droidwarden"]);
    assert!(!root.join("usr/bin/droidwarden").exists());
    assert!(
        !root
            .join("usr/lib/systemd/system/droidwarden.service")
            .exists()
    );
    assert_eq!(read(&config), edited);
    assert!(state.join("mqtt-users.json").exists());

    // A purge says what it removes, then removes it.
    let said = dpkg(&["--purge", "droidwarden"]);
    assert!(
        said.contains("purge: removing its state, /var/lib/droidwarden"),
        "{said}"
    );
    assert!(
        said.contains("purge: removing /etc/droidwarden/mqtt-password"),
        "{said}"
    );
    assert!(!state.exists());
    assert!(!root.join("etc/droidwarden").exists());
    assert!(!wants.exists());
}

#[test]
fn the_tarball_holds_the_packages_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = Command::new(workspace().join("scripts/package-deb"));
    cmd.arg("--binary")
        .arg(binary("droidwarden"))
        .arg("--out")
        .arg(dir.path())
        .args(["--compression", "none", "--tarball"]);
    let output = run_with_timeout(cmd, Duration::from_secs(180));
    assert!(output.status.success(), "package-deb: {}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let printed: Vec<&str> = stdout.lines().collect();
    let [tarball, deb] = printed[..] else {
        panic!("the tarball's and the .deb's paths: {stdout}");
    };
    let arch = run("dpkg", &["--print-architecture"]);
    assert!(
        tarball.ends_with(&format!(
            "droidwarden-{}-{}.tar.gz",
            debian_version(),
            arch.trim()
        )),
        "{tarball}"
    );
    let names = |listing: String| -> Vec<String> {
        let mut names: Vec<String> = listing
            .lines()
            .map(|l| l.trim_start_matches("./").trim_end_matches('/').to_owned())
            .filter(|l| !l.is_empty())
            .collect();
        names.sort();
        names
    };
    let in_tar = names(run("tar", &["-tzf", tarball]));
    let in_deb = names(
        run("dpkg-deb", &["--contents", deb])
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    assert_eq!(in_tar, in_deb, "the same files as the package");
    assert!(in_tar.contains(&"usr/bin/droidwarden".to_owned()));
    assert!(!in_tar.iter().any(|n| n.starts_with("DEBIAN")));
    let owners = run("tar", &["-tvzf", tarball]);
    assert!(
        owners.lines().all(|l| l.contains(" 0/0 ")),
        "every file root's: {owners}"
    );
}
