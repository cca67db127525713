//! The D-Bus API without any bus (issue #11): a fresh server, as root in a
//! plain shell, has no session bus and no policy for the system bus. With
//! the default `[dbus] bus = "auto"` the daemon serves
//! `org.droidwarden.Daemon1` peer-to-peer on `<state dir>/api.sock`, and
//! the CLI (`devices`, `call`, `status`, `ask`) reaches it there. The real
//! daemon binary, the real adb server, an emulated phone and a scripted
//! language model; no bus is reachable at all.

use droidwarden_agent::testing::{ScriptStep, ScriptedLlm};
use droidwarden_agent::{ModelReply, ProviderKind};
use droidwarden_e2e::WAIT;
use droidwarden_e2e::dbus::{no_bus_env, without_bus};
use droidwarden_e2e::mqtt::Daemon;
use droidwarden_e2e::{
    AdbServer, Sim, SimOptions, binary, run_with_timeout, scripted_llm_config, wait_for,
};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The daemon with the default `[dbus] bus = "auto"` and no bus anywhere.
struct Rig {
    daemon: Daemon,
    sim: Sim,
    adb: AdbServer,
    /// An empty `XDG_RUNTIME_DIR`, so that no socket of a real user's
    /// daemon is found.
    runtime: tempfile::TempDir,
    _rt: tokio::runtime::Runtime,
    llm: ScriptedLlm,
}

/// What one CLI run returned.
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn rig() -> Rig {
    let (rt, llm) = droidwarden_e2e::scripted_model();
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions {
        model: Some("Pixel 8".into()),
        ..SimOptions::default()
    });
    let config = config(&sim, &llm);
    let runtime = tempfile::tempdir().expect("runtime dir");
    let daemon = Daemon::start_without_bus(&adb, &config, runtime.path());
    let rig = Rig {
        daemon,
        sim,
        adb,
        runtime,
        _rt: rt,
        llm,
    };
    wait_for("the socket", WAIT, || rig.socket().exists().then_some(()));
    rig
}

fn config(sim: &Sim, llm: &ScriptedLlm) -> String {
    format!(
        "{broker}[adb]\npoll_interval_ms = 300\nconnect = [\"{serial}\"]\n[[devices]]\nname = \"phone\"\ntransport = \"adb\"\nserial = \"{serial}\"\n{llm}",
        broker = droidwarden_e2e::mqtt::ANY_BROKER_PORT,
        serial = sim.serial(),
        llm = scripted_llm_config(llm, ProviderKind::Openai),
    )
}

impl Rig {
    fn socket(&self) -> PathBuf {
        self.daemon.state_dir.path().join("api.sock")
    }

    /// `droidwarden ARGS` with the daemon's configuration, no bus.
    fn cli(&self, args: &[&str]) -> Out {
        let mut cmd = Command::new(binary("droidwarden"));
        cmd.arg("--config")
            .arg(self.daemon.config_path())
            .args(args)
            .env("HOME", self.adb.home());
        without_bus(&mut cmd, self.runtime.path());
        let out = run_with_timeout(cmd, Duration::from_secs(60));
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.cli(args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", out.stdout))
    }
}

#[test]
fn without_a_bus_the_cli_reaches_the_daemon_on_its_socket() {
    let r = rig();
    // (1) devices and call through the socket, and the call on the status.
    wait_for("the phone online via the socket", WAIT, || {
        let out = r.cli(&["devices", "--json"]);
        (out.code == 0
            && serde_json::from_str::<Value>(&out.stdout)
                .is_ok_and(|d| d["devices"][0]["online"] == true))
        .then_some(())
    });
    let devices = r.json(&["devices", "--json"]);
    assert_eq!(devices["devices"][0]["name"], "phone", "{devices}");
    assert_eq!(devices["devices"][0]["model"], "Pixel 8", "{devices}");
    let result = r.json(&["call", "battery", "status"]);
    assert_eq!(
        result["level_percent"],
        r.sim.state()["battery"]["level"],
        "{result}"
    );
    let status = r.json(&["status", "--json"]);
    assert_eq!(
        status["devices"][0]["services"]["battery"]["state"], "success",
        "{status}"
    );
    // Run as root (as CI runs), `status` checks whether another user can
    // reach the adb server by connecting as `nobody`: here nothing stops
    // it, and it says so. As another user it says nothing of it.
    // (The CLI finds the test's adb server as the daemon does, by its
    // `[adb] server`.)
    let server = format!("127.0.0.1:{}", r.adb.port);
    let status_of_adb = |args: &[&str]| {
        r.daemon
            .cli_without_bus(&r.adb, r.runtime.path(), args)
            .stdout
    };
    let status: Value =
        serde_json::from_str(&status_of_adb(&["status", "--json"])).expect("status JSON");
    assert_eq!(status["adb_server"]["address"], server.as_str(), "{status}");
    // The daemon's own health: version, the adb server it uses (answering,
    // with its version), the broker, the agent, approvals, automations.
    let daemon = &status["daemon"];
    assert_eq!(daemon["version"], env!("CARGO_PKG_VERSION"), "{status}");
    assert_eq!(daemon["adb"]["answers"], true, "{status}");
    assert!(
        daemon["adb"]["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("1.0.")),
        "{status}"
    );
    assert_eq!(daemon["agent"]["on"], true, "{status}");
    assert_eq!(daemon["agent"]["model"], "openai scripted", "{status}");
    assert_eq!(daemon["approvals_waiting"], 0, "{status}");
    assert_eq!(daemon["automations"]["count"], 0, "{status}");
    assert!(
        daemon["broker"]
            .as_str()
            .is_some_and(|b| !b.ends_with(":0")),
        "the bound address, not the configured port 0: {status}"
    );
    let text = status_of_adb(&["status"]);
    assert!(
        text.contains("adb server") && text.contains("answers, version 1.0."),
        "{text}"
    );
    if droidwarden_e2e::own_uid() == Some(0) {
        assert_eq!(status["adb_server"]["other_users"], "open", "{status}");
        let text = status_of_adb(&["status"]);
        assert!(text.contains("accepts other local users"), "{text}");
    } else {
        assert_eq!(status["adb_server"]["other_users"], "unchecked", "{status}");
    }

    // The standard tools, which take any --address for a bus's, work too.
    let reply = r.gdbus("ListDevices", &[]).expect("ListDevices");
    assert!(reply.contains("Pixel 8"), "{reply}");

    // `--socket` names the socket explicitly, and only that one is tried.
    let socket = r.socket();
    let explicit = r.json(&["--socket", socket.to_str().unwrap(), "devices", "--json"]);
    assert_eq!(explicit["devices"][0]["name"], "phone", "{explicit}");
    let elsewhere = r.runtime.path().join("other.sock");
    let out = r.cli(&["--socket", elsewhere.to_str().unwrap(), "status"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("not running") && out.stderr.contains("other.sock"),
        "{}",
        out.stderr
    );

    // (2) The socket is the owner's alone, in a directory others cannot
    // enter, and a second daemon does not take it over.
    let mode = std::fs::metadata(r.socket()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let dir_mode = std::fs::metadata(r.daemon.state_dir.path())
        .unwrap()
        .permissions()
        .mode()
        & 0o007;
    assert_eq!(dir_mode, 0, "the state directory is not open to others");
    let config = config(&r.sim, &r.llm);
    let second_state = tempfile::tempdir().expect("state");
    let mut second = {
        // The same state directory, so the same socket path.
        let toml = format!(
            "{config}\n[state]\ndir = \"{}\"\n",
            r.daemon.state_dir.path().display()
        );
        let mut cmd = Command::new(binary("droidwarden"));
        let file = second_state.path().join("config.toml");
        std::fs::write(&file, toml).unwrap();
        cmd.arg("--config").arg(&file).arg("daemon");
        r.adb.client_env(&mut cmd);
        without_bus(&mut cmd, r.runtime.path());
        run_with_timeout(cmd, Duration::from_secs(30))
    };
    assert!(!second.status.success(), "a second daemon must not start");
    let log = String::from_utf8_lossy(&std::mem::take(&mut second.stderr)).into_owned();
    assert!(
        log.contains("another droidwarden daemon answers on") && log.contains("api.sock"),
        "{log}"
    );
    // The first one still serves.
    assert_eq!(
        r.json(&["devices", "--json"])["devices"][0]["name"],
        "phone"
    );

    // (3) ask over the socket: the SessionEvent signals reach the CLI.
    // An answer about the phones without a tool call is sent back once
    // (`[agent] tool_nudge`): the model says it twice.
    for _ in 0..2 {
        r.llm
            .push(ScriptStep::Reply(ModelReply::text("The phone is fine.")));
    }
    let out = r.cli(&["ask", "how", "is", "the", "phone"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("The phone is fine."), "{}", out.stdout);

    // (4) Stopped: the socket is gone and the CLI says where it looked.
    let mut daemon = r.daemon;
    let socket = daemon.state_dir.path().join("api.sock");
    assert_eq!(daemon.terminate(), Some(0), "{}", daemon.log());
    assert!(!socket.exists(), "the socket is removed at shutdown");
    let mut cmd = Command::new(binary("droidwarden"));
    cmd.arg("--config")
        .arg(daemon.config_path())
        .args(["devices"])
        .env("HOME", r.adb.home());
    without_bus(&mut cmd, r.runtime.path());
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("not running"), "{stderr}");
    assert!(stderr.contains("session bus"), "{stderr}");
    assert!(stderr.contains(&socket.display().to_string()), "{stderr}");
    assert!(stderr.contains("--local"), "{stderr}");
}

impl Rig {
    /// `gdbus call` of `method` with `args` on the socket (an independent
    /// D-Bus client): its output, or its error text.
    fn gdbus(&self, method: &str, args: &[&str]) -> Result<String, String> {
        let mut cmd = Command::new("gdbus");
        cmd.args(["call", "--address"])
            .arg(format!("unix:path={}", self.socket().display()))
            .args([
                "--dest",
                "org.droidwarden.Daemon1",
                "--object-path",
                "/org/droidwarden/Daemon1",
                "--method",
                &format!("org.droidwarden.Daemon1.{method}"),
            ])
            .args(args);
        let out = run_with_timeout(cmd, Duration::from_secs(30));
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

/// An approval answered on the socket is recorded with the peer's uid,
/// which the kernel gives (there is no bus daemon to vouch for it).
#[test]
fn an_approval_answered_on_the_socket_records_the_peers_uid() {
    let r = rig();
    r.llm.push(droidwarden_e2e::agent_rig::call(
        "android_device",
        serde_json::json!({"device": "phone", "service_id": "wifi_automation", "action": "disable", "parameters": {}}),
    ));
    r.llm
        .push(ScriptStep::Reply(ModelReply::text("Wi-Fi is off.")));
    let asked = r.gdbus("Ask", &["", "turn wifi off"]).expect("Ask");
    let session = asked
        .split('\'')
        .nth(1)
        .unwrap_or_else(|| panic!("a session id in {asked}"))
        .to_owned();
    // gdbus prints the JSON array inside a quoted string: ('[{"approval_id":"…",…}]',)
    let id = wait_for("the approval request", WAIT, || {
        let listed = r.gdbus("ListApprovals", &[]).ok()?;
        let (_, rest) = listed.split_once("\"approval_id\":\"")?;
        Some(rest.split('"').next()?.to_owned())
    });
    r.gdbus("Approve", &[&id]).expect("Approve");
    let uid = droidwarden_e2e::own_uid().expect("own uid");
    let expected = format!("**Approval** `{id}`: approved by API socket uid {uid} · ");
    wait_for("the approval in the session's history", WAIT, || {
        let markdown = r.gdbus("ShowSession", &[&session]).ok()?;
        (markdown.contains(&expected) && markdown.contains("Wi-Fi is off.")).then_some(())
    });
}

#[test]
fn a_stale_socket_file_is_replaced() {
    let (_rt, llm) = droidwarden_e2e::scripted_model();
    let adb = AdbServer::shared();
    let sim = adb.phone(SimOptions::default());
    let state = tempfile::tempdir().expect("state");
    // A socket nobody listens on: what a killed daemon leaves.
    let stale = state.path().join("api.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).expect("bind"));
    assert!(stale.exists());
    let runtime = tempfile::tempdir().expect("runtime");
    let daemon = Daemon::start_with_env(
        &adb,
        &config(&sim, &llm),
        state,
        &no_bus_env(runtime.path()),
    );
    wait_for("the daemon on its socket", WAIT, || {
        daemon
            .log()
            .contains("D-Bus API ready (socket only)")
            .then_some(())
    });
    assert!(
        daemon.log().contains("removing a stale API socket"),
        "{}",
        daemon.log()
    );
}
