//! `terminull-model-server`: runs the scripted model server and prints `listening on ADDR` as its first stdout line.

use std::{net::IpAddr, time::Duration};

use anyhow::Context;
use clap::Parser;
use terminull_model_server::{Config, serve};

/// Scripted offline model server (Anthropic Messages, OpenAI Responses / Chat Completions, Gemini).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Port to listen on (0 = pick a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Address to bind (loopback only by default).
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Command the `tool` scenario asks the agent to run.
    #[arg(long, env = "MOCK_CMD", default_value = "echo hello")]
    command: String,
    /// File path the `write` scenario asks the agent to write.
    #[arg(long, default_value = "made_by_agent.txt")]
    write_path: String,
    /// Delay between stream events in the `slow` scenario, in milliseconds.
    #[arg(long, default_value_t = 250)]
    slow_delay_ms: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let config = Config {
        shell_command: args.command,
        write_path: args.write_path,
        slow_delay: Duration::from_millis(args.slow_delay_ms),
        ..Config::default()
    };
    let listener = tokio::net::TcpListener::bind((args.bind, args.port))
        .await
        .with_context(|| format!("binding {}:{}", args.bind, args.port))?;
    let addr = listener.local_addr()?;
    // The one stdout line: scripts read the bound address from it.
    #[allow(clippy::print_stdout)]
    {
        println!("listening on {addr}");
    }
    serve(listener, config).await?;
    Ok(())
}
