//! `droidwarden mcp`: the MCP server on standard input and output, the
//! phones reached through the running daemon (or `--local`).

use crate::client::Target;
use crate::config::Config;
use droidwarden_agent::tools::ToolMode;
use droidwarden_core::phones::{self, PhoneApi};
use droidwarden_mcp::{jsonrpc, server};
use rmcp::ServiceExt;
use std::process::ExitCode;

/// `droidwarden mcp`.
#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    /// Offer the phones as one `android_device` tool (toolkit) or one
    /// `android_<service>` tool per service (direct); default `[mcp] tool_mode`.
    #[arg(long, value_parser = ["toolkit", "direct"])]
    tool_mode: Option<String>,
    #[command(flatten)]
    target: Target,
}

type Reader = Box<dyn tokio::io::AsyncRead + Send + Unpin>;
type Writer = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;

/// Standard input and output for the protocol. When they are pipes (as
/// MCP clients launch servers) they are read and written on the runtime
/// itself, without the hand-off to a blocking thread that tokio's `stdin`
/// and `stdout` make for every read and write; otherwise those.
fn stdio() -> (Reader, Writer) {
    use std::os::fd::AsFd as _;
    use tokio::net::unix::pipe;
    let input: Option<Reader> = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| pipe::Receiver::from_file(std::fs::File::from(fd)).ok())
        .map(|r| Box::new(r) as Reader);
    let output: Option<Writer> = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| pipe::Sender::from_file(std::fs::File::from(fd)).ok())
        .map(|w| Box::new(w) as Writer);
    // Messages the SDK would drop or misanswer are answered first.
    let (reader, writer) = jsonrpc::checked(
        input.unwrap_or_else(|| Box::new(tokio::io::stdin())),
        output.unwrap_or_else(|| Box::new(tokio::io::stdout())),
    );
    (Box::new(reader), Box::new(writer))
}

/// Serve MCP on stdio until the client closes it.
pub(crate) async fn run(args: McpArgs, config: Config) -> ExitCode {
    let mode = match args.tool_mode.as_deref() {
        Some("direct") => ToolMode::Direct,
        Some(_) => ToolMode::Toolkit,
        None => config.mcp.tool_mode,
    };
    let backend: std::sync::Arc<dyn PhoneApi> = if args.target.local {
        std::sync::Arc::new(phones::Local::new(
            config.adb.clone(),
            config.phone_services.clone(),
            config.agent.approval.clone(),
        ))
    } else {
        match crate::client::daemon(args.target.bus, &config, true).await {
            Ok(client) => std::sync::Arc::new(phones::Remote::new(
                std::sync::Arc::new(client),
                config.agent.approval.clone(),
            )),
            Err(e) => {
                eprintln!("droidwarden mcp: {}", e.message);
                return ExitCode::FAILURE;
            }
        }
    };
    // The skills, as `droidwarden skills` reads them (the daemon's files).
    let skills = crate::assistant::load_skills(&config.agent.skills, &config.state_dir).await;
    let service = match server::PhoneServer::new(backend, mode)
        .with_schemas(config.mcp.tool_schemas)
        .with_skills(std::sync::Arc::new(skills))
        // The client runs as this process's user, whom the daemon knows by
        // uid from the bus or the socket: the person answering. Without a
        // daemon (`--local`) there are no approvals to ask about.
        .with_elicitation(
            config
                .mcp
                .elicitation
                .then(|| format!("uid {}", rustix::process::getuid().as_raw())),
            std::sync::Arc::default(),
        )
        .serve(stdio())
        .await
    {
        Ok(service) => service,
        Err(e) => {
            eprintln!("droidwarden mcp: the client did not initialise: {e}");
            return ExitCode::FAILURE;
        }
    };
    match service.waiting().await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("droidwarden mcp: {e}");
            ExitCode::FAILURE
        }
    }
}
