//! The `droidwarden-sim` binary: ready line, control port, replay, command
//! log file, clean exit on SIGTERM, clear start-up errors.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

const DEADLINE: Duration = Duration::from_secs(30);

fn sim_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_droidwarden-sim"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Waits for the ready line and returns (adb, control) addresses.
async fn ready(child: &mut Child) -> (String, String) {
    let line = crate::common::ready_line(child, DEADLINE).await;
    let rest = line
        .strip_prefix("droidwarden-sim ready adb=")
        .expect("the ready line format");
    let (adb, control) = rest.split_once(" control=").expect("a control field");
    (adb.to_owned(), control.to_owned())
}

struct Control {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

impl Control {
    async fn connect(addr: &str) -> Self {
        let stream = tokio::time::timeout(DEADLINE, TcpStream::connect(addr))
            .await
            .expect("connect within the deadline")
            .expect("control port reachable");
        let (r, w) = stream.into_split();
        Self {
            reader: BufReader::new(r),
            writer: w,
        }
    }

    async fn call(&mut self, line: &str) -> Value {
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write");
        let mut reply = String::new();
        tokio::time::timeout(DEADLINE, self.reader.read_line(&mut reply))
            .await
            .expect("reply within the deadline")
            .expect("read");
        serde_json::from_str(&reply).expect("a JSON reply line")
    }
}

async fn terminate(mut child: Child) {
    let pid = child.id().expect("running").to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("exits within the deadline")
        .expect("wait");
    assert!(exit.success(), "clean exit on SIGTERM, got {exit:?}");
}

/// Sends one ADB shell request with a minimal client and returns its raw
/// WRTE payload bytes (enough to check replay without an adb server).
async fn adb_shell_raw(addr: &str, command: &str) -> Vec<u8> {
    fn msg(cmd: &[u8; 4], a0: u32, a1: u32, data: &[u8]) -> Vec<u8> {
        let c = u32::from_le_bytes(*cmd);
        let sum = data.iter().map(|b| u32::from(*b)).sum::<u32>();
        let mut v = Vec::new();
        for w in [c, a0, a1, data.len() as u32, sum, c ^ 0xffff_ffff] {
            v.extend_from_slice(&w.to_le_bytes());
        }
        v.extend_from_slice(data);
        v
    }
    async fn read_msg(s: &mut TcpStream) -> ([u8; 4], u32, u32, Vec<u8>) {
        use tokio::io::AsyncReadExt;
        let mut h = [0u8; 24];
        s.read_exact(&mut h).await.expect("header");
        let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let mut data = vec![0u8; word(12) as usize];
        s.read_exact(&mut data).await.expect("payload");
        ([h[0], h[1], h[2], h[3]], word(4), word(8), data)
    }
    let run = async {
        let mut s = TcpStream::connect(addr).await.expect("adb port");
        s.write_all(&msg(b"CNXN", 0x0100_0001, 4096, b"host::\0"))
            .await
            .expect("cnxn");
        let (c, _, _, banner) = read_msg(&mut s).await;
        assert_eq!(&c, b"CNXN");
        assert!(String::from_utf8_lossy(&banner).contains("features=shell_v2,cmd"));
        s.write_all(&msg(b"OPEN", 7, 0, format!("shell:{command}\0").as_bytes()))
            .await
            .expect("open");
        let mut out = Vec::new();
        loop {
            let (c, local, _, data) = read_msg(&mut s).await;
            match &c {
                b"OKAY" => {}
                b"WRTE" => {
                    out.extend_from_slice(&data);
                    s.write_all(&msg(b"OKAY", 7, local, &[]))
                        .await
                        .expect("okay");
                }
                b"CLSE" => return out,
                other => panic!("unexpected {other:?}"),
            }
        }
    };
    tokio::time::timeout(DEADLINE, run)
        .await
        .expect("shell within the deadline")
}

#[tokio::test]
async fn ready_line_control_port_and_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_path = dir.path().join("commands.jsonl");
    let mut child = sim_command(&[
        "--adb-port",
        "0",
        "--control-port",
        "0",
        "--serial",
        "BIN001",
        "--command-log",
        log_path.to_str().expect("utf-8 path"),
    ])
    .spawn()
    .expect("spawn the binary");
    let (adb, control) = ready(&mut child).await;
    assert!(adb.starts_with("127.0.0.1:"));
    let mut c = Control::connect(&control).await;

    let state = c.call(r#"{"op":"state"}"#).await;
    assert_eq!(state["ok"], true);
    assert_eq!(state["state"]["props"]["serial"], "BIN001");
    assert_eq!(
        c.call(r#"{"op":"set","path":"battery.level","value":42}"#)
            .await,
        json!({"ok": true})
    );
    assert_eq!(c.call("this is not json").await["ok"], false);
    assert_eq!(
        c.call(r#"{"op":"set","path":"battery.nope","value":1}"#)
            .await["ok"],
        false
    );

    let out = adb_shell_raw(&adb, "dumpsys battery | grep level").await;
    assert_eq!(String::from_utf8_lossy(&out), "  level: 42\n");

    let log = c.call(r#"{"op":"log"}"#).await;
    assert_eq!(log["log"][0]["argv"], json!(["dumpsys", "battery"]));
    assert_eq!(log["log"][1]["argv"], json!(["grep", "level"]));
    let file = std::fs::read_to_string(&log_path).expect("command log file");
    let first: Value =
        serde_json::from_str(file.lines().next().expect("a line")).expect("JSON line");
    assert_eq!(first["argv"], json!(["dumpsys", "battery"]));
    assert_eq!(first["seq"], 1);

    assert_eq!(
        c.call(r#"{"op":"listen","enabled":false}"#).await,
        json!({"ok": true, "listening": false})
    );
    assert!(
        TcpStream::connect(&adb).await.is_err(),
        "the phone disappeared"
    );
    assert_eq!(
        c.call(r#"{"op":"listen","enabled":true}"#).await["ok"],
        true
    );
    TcpStream::connect(&adb)
        .await
        .expect("back on the same port");

    terminate(child).await;
}

fn write(dir: &Path, name: &str, body: &str) {
    std::fs::write(dir.join(name), body).expect("write");
}

#[tokio::test]
async fn replay_answers_recorded_commands() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "index.json",
        r#"[{"command":"dumpsys battery","stdout":"battery.txt","stderr":null,"exit":0}]"#,
    );
    write(
        dir.path(),
        "battery.txt",
        "Current Battery Service state:\n  level: 7\n",
    );
    let mut child = sim_command(&[
        "--adb-port",
        "0",
        "--replay",
        dir.path().to_str().expect("utf-8"),
    ])
    .spawn()
    .expect("spawn");
    let (adb, control) = ready(&mut child).await;
    assert_eq!(control, "-");
    let out = adb_shell_raw(&adb, "'dumpsys' 'battery'").await;
    assert_eq!(
        String::from_utf8_lossy(&out),
        "Current Battery Service state:\n  level: 7\n"
    );
    // Not recorded: the built-in answer.
    let out = adb_shell_raw(&adb, "getprop ro.product.model").await;
    assert_eq!(String::from_utf8_lossy(&out), "Pixel 7\n");
    terminate(child).await;
}

#[tokio::test]
async fn a_broken_replay_index_stops_start_up_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "index.json",
        r#"[{"command":"dumpsys battery","stdout":"missing.txt"}]"#,
    );
    let out = tokio::time::timeout(
        DEADLINE,
        sim_command(&[
            "--adb-port",
            "0",
            "--replay",
            dir.path().to_str().expect("utf-8"),
        ])
        .output(),
    )
    .await
    .expect("exits within the deadline")
    .expect("runs");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no ready line");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("index.json") && err.contains("missing.txt"),
        "{err}"
    );
}
