//! The commands that talk to a bridge: finding it (the daemon, an in-process bridge or
//! a remote one through a relay or the LAN) and listing sessions.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use terminull_bridge::daemon_client::Client;
use terminull_bridge::home::Home;
use terminull_bridge::home_guard::{self, HomeGuardError, HomeLock};
use terminull_bridge::registry::ScanOptions;
use terminull_bridge::service::Service;
use terminull_protocol::control::{self, ControlMessage, ReplyResult};

use crate::args::RemoteArgs;
use crate::{runtime, write_stdout};

/// An in-process bridge and the home's lock it holds.
pub(crate) type InProcess = (Service, HomeLock);

/// Connects to the daemon of `home`, or starts an in-process bridge when none runs; the
/// in-process bridge holds the home's lock like a daemon, so two never write one history.
pub(crate) async fn client_for(home: &Home) -> anyhow::Result<(Client, Option<InProcess>)> {
    let socket = home.socket();
    if socket.exists()
        && let Ok(client) = Client::connect(&socket).await
    {
        return Ok((client, None));
    }
    let what = format!("an in-process bridge, {}", crate::command_line());
    let lock = match home_guard::prepare(home, &what) {
        Ok(lock) => lock,
        Err(held @ HomeGuardError::Held { .. }) => {
            // A daemon that is starting binds its socket right after taking the lock.
            for _ in 0..20 {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                if let Ok(client) = Client::connect(&socket).await {
                    return Ok((client, None));
                }
            }
            return Err(held.into());
        }
        Err(e) => return Err(e.into()),
    };
    let config = home.load_config()?;
    let scan = ScanOptions::new(home.clone(), config.clone());
    let policy = config.session_policy();
    let service = Service::start_scanning(home.clone(), config, scan, policy)?;
    Ok((Client::in_process(&service), Some((service, lock))))
}

pub(crate) fn with_client<F, Fut, E>(home: Option<PathBuf>, remote: RemoteArgs, run: F) -> anyhow::Result<ExitCode>
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = Result<(bool, Client), E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    let home = Home::resolve(home)?;
    runtime()?.block_on(async move {
        let (client, service) =
            if remote.remote || remote.relay.is_some() || remote.lan.is_some() || remote.bridge.is_some() {
                (remote_client(&home, &remote).await?, None)
            } else {
                client_for(&home).await?
            };
        let outcome = run(client).await;
        if let Some((service, _lock)) = service {
            service.shutdown().await;
        }
        let (ok, _client) = outcome?;
        Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
    })
}

pub(crate) fn list(json: bool, home: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    runtime()?.block_on(async move {
        let (mut client, service) = client_for(&home).await?;
        let mut kept = Vec::new();
        let result = client.call(ControlMessage::ListSessions(control::ListSessions {}), &mut kept).await;
        if let Some((service, _lock)) = service {
            service.shutdown().await;
        }
        let ReplyResult::Sessions { sessions } = result? else { anyhow::bail!("unexpected reply to list_sessions") };
        if json {
            write_stdout(&serde_json::to_string_pretty(&sessions)?)?;
        } else {
            let mut out = format!("{:<40} {:<12} {:<19} {:>6}  {}\n", "SESSION", "AGENT", "STATE", "BLOCKS", "CWD");
            for s in &sessions {
                let state = serde_json::to_value(s.state)?.as_str().unwrap_or_default().to_owned();
                out.push_str(&format!(
                    "{:<40} {:<12} {:<19} {:>6}  {}\n",
                    s.session_id, s.agent_id, state, s.last_seq, s.cwd
                ));
            }
            write_stdout(out.trim_end())?;
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub(crate) fn external(
    agent: Option<String>,
    cwd: Option<String>,
    json: bool,
    home: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    runtime()?.block_on(async move {
        let (mut client, service) = client_for(&home).await?;
        let mut kept = Vec::new();
        let message =
            ControlMessage::ScanExternalSessions(control::ScanExternalSessions { agent: agent.map(Into::into), cwd });
        let result = client.call(message, &mut kept).await;
        if let Some((service, _lock)) = service {
            service.shutdown().await;
        }
        let ReplyResult::ExternalSessions { sessions } = result? else {
            anyhow::bail!("unexpected reply to scan_external_sessions")
        };
        if json {
            write_stdout(&serde_json::to_string_pretty(&sessions)?)?;
        } else {
            let mut out = format!("{:<12} {:<40} {:>8}  {:<40} {}\n", "AGENT", "SESSION", "MESSAGES", "CWD", "TITLE");
            for s in &sessions {
                let count = s.session.message_count.map_or_else(|| "?".to_owned(), |n| n.to_string());
                out.push_str(&format!(
                    "{:<12} {:<40} {:>8}  {:<40} {}\n",
                    s.agent_id,
                    s.session.agent_session_id,
                    count,
                    s.session.cwd.as_deref().unwrap_or("?"),
                    s.session.title.as_deref().unwrap_or("")
                ));
            }
            write_stdout(out.trim_end())?;
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub(crate) fn continue_in_terminal(session: String, json: bool, home: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    runtime()?.block_on(async move {
        let (mut client, service) = client_for(&home).await?;
        let mut kept = Vec::new();
        let message = ControlMessage::ContinueInTerminal(control::ContinueInTerminal { session_id: session.into() });
        let result = client.call(message, &mut kept).await;
        if let Some((service, _lock)) = service {
            service.shutdown().await;
        }
        let ReplyResult::TerminalCommand { argv, cwd, command } = result? else {
            anyhow::bail!("unexpected reply to continue_in_terminal")
        };
        if json {
            write_stdout(&serde_json::to_string_pretty(
                &serde_json::json!({"argv": argv, "cwd": cwd, "command": command}),
            )?)?;
        } else {
            write_stdout(&command)?;
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Opens an encrypted link to a paired bridge, as this home's device: over the given
/// path, or (`--remote`, or both paths given) LAN first with the relay as fallback.
pub(crate) async fn remote_client(home: &Home, remote: &RemoteArgs) -> anyhow::Result<Client> {
    use terminull_client::connection::Connection;
    use terminull_client::failover::{self, Routes};
    let device = terminull_client::home::DeviceHome::at(home.device_dir());
    let record = device.bridge(remote.bridge.as_deref())?;
    let connection = match (&remote.lan, &remote.relay) {
        (Some(lan), None) if !remote.remote => Connection::open_lan(&device, &record, lan).await,
        (None, Some(relay)) if !remote.remote => Connection::open(&device, &record, Some(relay)).await,
        (lan, relay) => {
            let mut routes = Routes::from_record(&record);
            if lan.is_some() || relay.is_some() {
                routes.lan = lan.clone().or(routes.lan);
                routes.relay = relay.clone().or(routes.relay);
            }
            failover::open(&device, &record, routes, Default::default()).await
        }
    };
    let connection = connection.with_context(|| format!("connecting to bridge {}", record.bridge_id))?;
    let mut path = connection.info.path.clone();
    eprintln!("connected to bridge {} over {}", record.bridge_id, *path.borrow());
    tokio::spawn(async move {
        while path.changed().await.is_ok() {
            eprintln!("the link to the bridge moved to {}", *path.borrow());
        }
    });
    Ok(Client::remote(connection))
}
