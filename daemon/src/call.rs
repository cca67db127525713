//! `droidwarden call`: one action on one phone, from the command line.
//!
//! Parameters come as `KEY=VALUE` words and/or `--params JSON`. A value is
//! read as JSON only where the action's schema expects a non-string, so
//! `package=123abc` stays a string and `level=40` becomes a number. They
//! are checked here against the catalogue, then the call goes to the
//! running daemon over D-Bus (so it is announced on MQTT and D-Bus like any
//! other), or, with `--local`, straight to the adb server from this process.

use crate::client::Target;
use crate::config::Config;
use droidwarden_services::schema::{Kind, NotAnObject};
use droidwarden_services::{Catalogue, CatalogueError, Command, ErrorCode, WireError};
use serde_json::{Map, Value, json};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub(crate) struct CallArgs {
    /// The device (may be left out when exactly one is online).
    #[arg(long, short)]
    device: Option<String>,
    /// All parameters as one JSON object (KEY=VALUE words override it).
    #[arg(long, value_name = "JSON")]
    params: Option<String>,
    /// Service id or node type, e.g. `battery` or `batteryMonitor`.
    service: String,
    /// The action, e.g. `status`.
    action: String,
    /// Parameters as KEY=VALUE.
    #[arg(value_name = "KEY=VALUE")]
    pairs: Vec<String>,
    #[command(flatten)]
    target: Target,
}

pub(crate) async fn run(args: CallArgs, config: Config) -> ExitCode {
    match call(&args, config).await {
        Ok(result) => {
            outln!(
                "{}",
                serde_json::to_string_pretty(&result).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            outln!("{}", json!({ "error": e }));
            ExitCode::FAILURE
        }
    }
}

async fn call(args: &CallArgs, config: Config) -> Result<Value, WireError> {
    let command = parse_command(args)?;
    if args.target.local {
        return call_local(args, &command, config).await;
    }
    let client = crate::client::daemon(args.target.bus, &config, true).await?;
    client
        .call(
            args.device.as_deref(),
            command.service_id(),
            command.action_name(),
            &command.params_json(),
        )
        .await
}

/// `--local`: the call from this process, straight to the adb server,
/// through a hub of its own: the same path as the daemon's callers (the
/// phone policy, the app in front, the device's order, one time bound).
async fn call_local(
    args: &CallArgs,
    command: &Command,
    config: Config,
) -> Result<Value, WireError> {
    droidwarden_core::phones::Local::new(config.adb, config.phone_services, config.agent.approval)
        .call_by_person(args.device.as_deref(), command.clone())
        .await
}

fn parse_command(args: &CallArgs) -> Result<Command, WireError> {
    let catalogue = Catalogue::get();
    let (service, action) = catalogue
        .action(&args.service, &args.action)
        .map_err(WireError::from)?;
    let mut params = match &args.params {
        None => Map::new(),
        Some(text) => match droidwarden_services::schema::object_from_slice(text.as_bytes()) {
            Ok(map) => map,
            Err(NotAnObject::Other(got)) => {
                return Err(CatalogueError::ParamsNotObject {
                    service: service.id.into(),
                    action: action.name.into(),
                    got,
                }
                .into());
            }
            Err(NotAnObject::NotJson(e)) => {
                return Err(WireError::new(
                    ErrorCode::InvalidParams,
                    format!("--params is not valid JSON: {e}"),
                ));
            }
        },
    };
    for pair in &args.pairs {
        let (key, value) = typed_pair(action, pair)?;
        params.insert(key, value);
    }
    catalogue
        .parse(service.id, action.name, &Value::Object(params))
        .map_err(WireError::from)
}

/// One `KEY=VALUE` word as a parameter of `action`: the value is read as
/// JSON only where the action's schema expects a non-string (so
/// `package=123abc` and `text=42` stay strings, `level=40` is a number).
/// `droidwarden call` and `droidwarden approve --edit` read them alike.
///
/// # Errors
/// A word without `=`.
pub(crate) fn typed_pair(
    action: &droidwarden_services::ActionSpec,
    pair: &str,
) -> Result<(String, Value), WireError> {
    let (key, raw) = pair.split_once('=').ok_or_else(|| {
        WireError::new(
            ErrorCode::InvalidParams,
            format!("parameter {pair:?} is not KEY=VALUE"),
        )
    })?;
    let wants_string = action
        .params
        .iter()
        .find(|p| p.name == key)
        .is_none_or(|p| matches!(p.schema.kind, Kind::String { .. }));
    let value = if wants_string {
        Value::String(raw.to_owned())
    } else {
        serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
    };
    Ok((key.to_owned(), value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: CallArgs,
    }

    fn parse(words: &[&str]) -> Result<Command, WireError> {
        let mut argv = vec!["call"];
        argv.extend_from_slice(words);
        parse_command(&Wrapper::parse_from(argv).args)
    }

    /// The example `droidwarden services SERVICE ACTION` prints is a call
    /// that works: its words give back the catalogue's example.
    #[test]
    fn every_printed_example_parses_to_the_catalogues_example() {
        for service in Catalogue::get().services() {
            for action in &service.actions {
                let pairs = crate::services_cli::example_pairs(&action.example);
                let mut words = vec![service.id, action.name];
                words.extend(pairs.iter().map(String::as_str));
                let cmd = parse(&words)
                    .unwrap_or_else(|e| panic!("{}.{}: {}", service.id, action.name, e.message));
                assert_eq!(cmd.params_json(), action.example, "{words:?}");
            }
        }
    }

    #[test]
    fn pairs_are_typed_by_the_schema() {
        let cmd = parse(&["audioAutomation", "set_volume", "stream=music", "level=40"]).unwrap();
        assert_eq!(cmd.params_json(), json!({"stream": "music", "level": 40}));
        let cmd = parse(&["app_launcher", "launch", "package=com.x123"]).unwrap();
        assert_eq!(cmd.params_json(), json!({"package": "com.x123"}));
        let cmd = parse(&[
            "device_state",
            "power_save",
            "--params",
            r#"{"enabled": false}"#,
            "enabled=true",
        ])
        .unwrap();
        assert_eq!(cmd.params_json(), json!({"enabled": true}));
    }

    #[test]
    fn bad_input_is_invalid_params() {
        for words in [
            &["screen_control", "set_brightness", "level=bright"][..],
            &["screen_control", "set_brightness", "level"][..],
            &["screen_control", "set_brightness", "--params", "{"][..],
            &["screen_control", "set_brightness", "--params", "[1]"][..],
            &["battery", "status", "x=1"][..],
        ] {
            let err = parse(words).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidParams, "{words:?}: {err}");
        }
        assert_eq!(
            parse(&["nope", "status"]).unwrap_err().code,
            ErrorCode::UnknownService
        );
    }
}
