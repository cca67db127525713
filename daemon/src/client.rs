//! How a command reaches the running daemon (`--bus`, `[dbus] bus`, the
//! private socket) and the output conventions every command shares
//! (`--json` errors, RFC 3339 times). The CLI's subcommands and the MCP
//! stdio server use it; it imports none of them, so no command module
//! needs the dispatcher (`cli.rs`).

use crate::config::{Config, DbusBus};
use crate::dbus::{Bus, client::Client};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use droidwarden_services::{ErrorCode, WireError};
use serde_json::{Value, json};
use std::process::ExitCode;

/// Where a command is carried out: the daemon on a bus, or this process.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Target {
    /// The bus the daemon is on (default: the configuration's dbus.bus).
    #[arg(long, value_parser = bus_arg(), conflicts_with = "local")]
    pub(crate) bus: Option<Bus>,
    /// Work in this process, without the daemon: talk to the adb server
    /// directly (ADB phones only).
    #[arg(long)]
    pub(crate) local: bool,
}

/// The bus to look for the daemon on: `--bus`, else `[dbus] bus`.
///
/// # Errors
/// D-Bus is off in the configuration and no `--bus` was given.
pub(crate) fn daemon_bus(flag: Option<Bus>, config: DbusBus) -> Result<Bus, WireError> {
    match (flag, config) {
        (Some(bus), _) => Ok(bus),
        // `socket`: the session bus is only named; the socket is where the
        // daemon is looked for (`daemon`).
        (None, DbusBus::Auto | DbusBus::Session | DbusBus::Socket) => Ok(Bus::Session),
        (None, DbusBus::System) => Ok(Bus::System),
        (None, DbusBus::Off) => Err(WireError::new(
            ErrorCode::InvalidRequest,
            "the D-Bus API is off in the configuration ([dbus] bus = \"none\"), so the daemon cannot be asked; use --local, or --bus session|system",
        )),
    }
}

/// Connect to the daemon for a command: at `--socket` when given; else on
/// the bus that `--bus` or `[dbus] bus` names; with `auto` (and no
/// `--bus`), on the session bus when the daemon is there, else over its
/// private socket.
pub(crate) async fn daemon(
    flag: Option<Bus>,
    config: &Config,
    local_hint: bool,
) -> Result<Client, WireError> {
    let hint = if local_hint { ", or use --local" } else { "" };
    if let Some(path) = &config.api_socket {
        return Client::over_socket(path, config.adb.call_timeout, local_hint)
            .await
            .map_err(|why| {
                let mut error = WireError::new(
                    ErrorCode::Internal,
                    format!(
                        "droidwarden daemon is not running at {} ({why}); start it (droidwarden daemon){hint}",
                        path.display()
                    ),
                );
                error.retryable = true;
                error
            });
    }
    let bus = daemon_bus(flag, config.dbus)?;
    // The longest a call can take by this configuration: an ADB action, or
    // a companion phone's queue and answer deadline. The daemon's own
    // figure (`CallTimeout`) wins when it gives one.
    let bound = config
        .adb
        .call_timeout
        .max(droidwarden_bridge::companion::handle_timeout(
            &config.companion,
        ));
    let socket_only = flag.is_none() && config.dbus == DbusBus::Socket;
    if !socket_only && (flag.is_some() || config.dbus != DbusBus::Auto) {
        return Client::connect(bus, bound, local_hint).await;
    }
    let on_bus = if socket_only {
        None
    } else {
        match Client::probe(bus, bound, local_hint).await {
            Ok(client) => return Ok(client),
            Err(why) => Some(why),
        }
    };
    let mut looked = Vec::new();
    for path in crate::dbus::p2p::candidates(&config.state_dir) {
        // A path that is not there is not worth a connection attempt.
        if tokio::fs::symlink_metadata(&path).await.is_err() {
            looked.push(format!("{} (no such socket)", path.display()));
            continue;
        }
        match Client::over_socket(&path, bound, local_hint).await {
            Ok(client) => return Ok(client),
            Err(why) => looked.push(format!("{} ({why})", path.display())),
        }
    }
    let bus_part = on_bus.map_or_else(String::new, |why| {
        format!("on the {} bus ({why}) nor ", bus.as_str())
    });
    let mut error = WireError::new(
        ErrorCode::Internal,
        format!(
            "droidwarden daemon is not running {bus_part}at {}; start it (droidwarden daemon){hint}",
            looked.join(", "),
        ),
    );
    error.retryable = true;
    Err(error)
}

/// Report a failed command on standard error.
pub(crate) fn fail(e: &WireError) -> ExitCode {
    eprintln!("droidwarden: {}", e.message);
    ExitCode::FAILURE
}

/// Report a failed command: with `--json`, as `{"error": {code, message,
/// retryable}}` on standard output (what a script parses), else as text on
/// standard error.
pub(crate) fn fail_as(e: &WireError, as_json: bool) -> ExitCode {
    if as_json {
        print_json(&json!({ "error": e }));
        ExitCode::FAILURE
    } else {
        fail(e)
    }
}

/// One `--json` convention for every command: a pretty-printed object,
/// every timestamp an RFC 3339 string (the daemon's unix-millisecond
/// `*_at` fields are converted here).
pub(crate) fn print_json(value: &Value) {
    let mut value = value.clone();
    rfc3339_times(&mut value);
    outln!(
        "{}",
        serde_json::to_string_pretty(&value).unwrap_or_default()
    );
}

pub(crate) fn rfc3339_times(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v.as_u64() {
                    Some(ms) if key.ends_with("_at") => {
                        *v = json!(crate::hub::rfc3339(
                            std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)
                        ));
                    }
                    _ => rfc3339_times(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rfc3339_times),
        _ => {}
    }
}

/// `--bus session|system`: the bus the running daemon is on.
pub(crate) fn bus_arg() -> impl TypedValueParser<Value = Bus> {
    PossibleValuesParser::new([
        PossibleValue::new("session").help("The user's session bus (`DBUS_SESSION_BUS_ADDRESS`)"),
        PossibleValue::new("system").help("The system bus"),
    ])
    .map(|name| match name.as_str() {
        "system" => Bus::System,
        _ => Bus::Session,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_is_looked_for_on_the_flag_then_the_configured_bus() {
        let check = |flag, config, expected: Option<Bus>| {
            assert_eq!(
                daemon_bus(flag, config).ok(),
                expected,
                "{flag:?} {config:?}"
            );
        };
        check(None, DbusBus::Auto, Some(Bus::Session));
        check(None, DbusBus::Session, Some(Bus::Session));
        check(None, DbusBus::System, Some(Bus::System));
        check(Some(Bus::System), DbusBus::Auto, Some(Bus::System));
        check(Some(Bus::Session), DbusBus::Off, Some(Bus::Session));
        let err = daemon_bus(None, DbusBus::Off).unwrap_err();
        assert!(err.message.contains("--local"), "{err}");
    }
}
