//! The real Debian adb server against the emulated phone.
//!
//! Each test starts its own adb server (isolated `HOME`, private
//! `ANDROID_ADB_SERVER_PORT`) and kills it on the way out, even on failure.
//! Every wait has a deadline; readiness is polled, never slept for.

use std::net::{SocketAddr, TcpListener};
use std::process::Output;
use std::time::{Duration, Instant};

use droidwarden_sim::state::Package;
use droidwarden_sim::{Fault, Sim, SimConfig, SimHandle};

/// Deadline for one adb invocation.
const ADB_CALL: Duration = Duration::from_secs(30);
/// Deadline for a device to show up as `device`.
const CONNECT: Duration = Duration::from_secs(30);

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A private adb server; `adb kill-server` runs when this is dropped.
struct AdbServer {
    home: tempfile::TempDir,
    port: u16,
}

impl AdbServer {
    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new("adb");
        cmd.args(args)
            .env("HOME", self.home.path())
            .env("ANDROID_ADB_SERVER_PORT", self.port.to_string())
            .env_remove("ANDROID_SERIAL")
            .env_remove("ADB_VENDOR_KEYS")
            .stdin(std::process::Stdio::null());
        cmd
    }

    async fn start() -> Self {
        let server = Self {
            home: tempfile::tempdir().expect("temp HOME"),
            port: free_port(),
        };
        let out = server.run(&["start-server"]).await;
        assert!(
            out.status.success(),
            "adb start-server failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        server
    }

    /// Runs `adb ARGS…` with a deadline.
    async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = tokio::process::Command::from(self.command(args));
        cmd.kill_on_drop(true);
        match tokio::time::timeout(ADB_CALL, cmd.output()).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => {
                panic!("cannot run adb {args:?} (is the Debian `adb` package installed?): {e}")
            }
            Err(_) => panic!("adb {args:?} did not finish within {ADB_CALL:?}"),
        }
    }

    /// `adb connect` until `adb devices` lists the phone as `device`.
    async fn connect(&self, addr: SocketAddr) -> String {
        let serial = addr.to_string();
        let deadline = Instant::now() + CONNECT;
        loop {
            self.run(&["connect", &serial]).await;
            let devices = self.run(&["devices"]).await;
            let listing = String::from_utf8_lossy(&devices.stdout).into_owned();
            if listing.lines().any(|l| l == format!("{serial}\tdevice")) {
                return serial;
            }
            assert!(
                Instant::now() < deadline,
                "{serial} never became a device; adb devices said:\n{listing}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn shell(&self, serial: &str, command: &str) -> Output {
        self.run(&["-s", serial, "shell", command]).await
    }

    /// The stdout of `adb -s SERIAL shell COMMAND`, decoded lossily.
    async fn shell_text(&self, serial: &str, command: &str) -> String {
        text(&self.shell(serial, command).await.stdout)
    }
}

impl Drop for AdbServer {
    fn drop(&mut self) {
        let _ = self.command(&["kill-server"]).output();
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn start_sim(config: SimConfig) -> SimHandle {
    Sim::start(config).await.expect("the emulated phone starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_adb_server_drives_the_phone() {
    let adb = AdbServer::start().await;
    let sim = start_sim(SimConfig {
        model: Some("Sim Phone".to_owned()),
        ..SimConfig::default()
    })
    .await;
    let serial = adb.connect(sim.adb_addr().expect("adb on")).await;

    // The banner reaches `adb devices -l`.
    let listing = text(&adb.run(&["devices", "-l"]).await.stdout);
    assert!(listing.contains("model:Sim_Phone"), "{listing}");

    // A dumpsys in the real format.
    let out = adb.shell(&serial, "dumpsys battery").await;
    assert!(out.status.success());
    let battery = text(&out.stdout);
    assert!(
        battery.starts_with("Current Battery Service state:\n"),
        "{battery}"
    );
    assert!(battery.contains("\n  level: 85\n"), "{battery}");

    // Sequencing and $? through the real shell-v2 path.
    let out = adb.shell(&serial, "echo hi; false; echo rc=$?").await;
    assert_eq!(text(&out.stdout), "hi\nrc=1\n");
    assert!(out.status.success());

    // The bridge's quoting arrives as single literal words.
    let out = adb
        .shell(&serial, "'echo' 'a;b' '$(id)' ; echo __dw_rc=$?")
        .await;
    assert_eq!(text(&out.stdout), "a;b $(id)\n__dw_rc=0\n");
    let log = sim.command_log();
    let argvs: Vec<Vec<String>> = log
        .iter()
        .rev()
        .take(2)
        .rev()
        .map(|e| e.argv.clone())
        .collect();
    assert_eq!(
        argvs,
        vec![
            vec!["echo".to_owned(), "a;b".to_owned(), "$(id)".to_owned()],
            vec!["echo".to_owned(), "__dw_rc=0".to_owned()],
        ]
    );

    // Unknown command: stderr and exit 127 carried by shell v2.
    let out = adb.shell(&serial, "frobnicate").await;
    assert_eq!(out.status.code(), Some(127));
    assert!(
        text(&out.stderr).contains("frobnicate: inaccessible or not found"),
        "{}",
        text(&out.stderr)
    );

    // exec-out: raw stdout, commands arrive shell-quoted.
    let out = adb
        .run(&["-s", &serial, "exec-out", "echo", "hello world"])
        .await;
    assert_eq!(text(&out.stdout), "hello world\n");

    // A large output (> 300 KB) arrives intact across many WRTEs.
    sim.update_state(|s| {
        for i in 0..6000 {
            let name = format!("com.example.bulk.app{i:05}");
            s.packages.push(Package {
                apk_path: format!("/data/app/~~{i:020}AAAA==/{name}-{i:020}BBBB==/base.apk"),
                package: name,
                system: false,
                enabled: true,
                launcher_activity: None,
                activities: Vec::new(),
                uid: 20_000 + i,
                running: false,
            });
        }
    });
    let expected = sim.execute("pm list packages -f").stdout;
    assert!(expected.len() > 300_000, "only {} bytes", expected.len());
    let out = adb.shell(&serial, "pm list packages -f").await;
    assert!(out.status.success());
    assert_eq!(out.stdout.len(), expected.len());
    assert!(out.stdout == expected, "large output differs");

    // State changes made over ADB are visible in-process.
    adb.shell(&serial, "svc wifi disable").await;
    assert!(!sim.state().wifi.enabled);
    assert!(
        adb.shell_text(&serial, "dumpsys wifi")
            .await
            .contains("\nWi-Fi is disabled\n")
    );

    // Faults: a delay, a failure, then a dropped connection.
    sim.set_fault(Fault::Delay(Duration::from_millis(300)));
    let started = Instant::now();
    adb.shell(&serial, "true").await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    sim.set_fault(Fault::Clear);
    sim.set_fault(Fault::Fail {
        exit: 3,
        stderr: "boom".to_owned(),
    });
    let out = adb.shell(&serial, "echo never").await;
    assert_eq!(
        (out.status.code(), text(&out.stdout), text(&out.stderr)),
        (Some(3), String::new(), "boom\n".to_owned())
    );
    sim.clear_command_log();
    sim.set_fault(Fault::Drop);
    let out = adb.shell(&serial, "echo dropped").await;
    assert!(
        !out.status.success(),
        "status {:?} stdout {:?} stderr {:?}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(!text(&out.stdout).contains("dropped"));
    assert!(
        sim.command_log().is_empty(),
        "a dropped request runs nothing"
    );

    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_adb_server_authenticates_and_tells_phones_apart() {
    let adb = AdbServer::start().await;
    let first = start_sim(SimConfig {
        auth: true,
        serial: Some("FIRST01".to_owned()),
        android_version: Some("13".to_owned()),
        ..SimConfig::default()
    })
    .await;
    let second = start_sim(SimConfig {
        serial: Some("SECOND02".to_owned()),
        model: Some("Other".to_owned()),
        ..SimConfig::default()
    })
    .await;
    let a = adb.connect(first.adb_addr().expect("adb on")).await;
    let b = adb.connect(second.adb_addr().expect("adb on")).await;
    assert_eq!(adb.shell_text(&a, "getprop ro.serialno").await, "FIRST01\n");
    assert_eq!(
        adb.shell_text(&a, "getprop ro.build.version.sdk").await,
        "33\n"
    );
    assert_eq!(
        adb.shell_text(&b, "getprop ro.serialno").await,
        "SECOND02\n"
    );
    assert_eq!(
        adb.shell_text(&b, "getprop ro.product.model").await,
        "Other\n"
    );
    first.shutdown().await;
    second.shutdown().await;
}
