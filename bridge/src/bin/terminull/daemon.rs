//! `terminull up`, the daemon, and `terminull agents`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use terminull_bridge::home::Home;
use terminull_bridge::local;
use terminull_bridge::registry::{self, ScanOptions, Source};
use terminull_bridge::service::Service;

use crate::{runtime, write_stdout};

pub(crate) fn up(
    home: Option<PathBuf>,
    log_level: &str,
    relay: Option<String>,
    lan: Option<String>,
    no_mdns: bool,
) -> anyhow::Result<ExitCode> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TERMINULL_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(log_level))
        .context("--log-level")?;
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .try_init();
    let home = Home::resolve(home)?;
    let config = home.load_config()?;
    runtime()?.block_on(async move {
        // One bridge per home; the home must be the user's; state in it is made private.
        let _lock = terminull_bridge::home_guard::prepare(&home, &format!("the daemon, {}", crate::command_line()))?;
        // The socket answers before any adapter is scanned: the scan runs in the background.
        let listener = local::bind(&home.socket()).await?;
        let scan = ScanOptions::new(home.clone(), config.clone());
        let config_relay = config.relay.as_ref().map(|r| r.url.clone());
        // `--lan` alone takes `[lan] listen`, else the default; `[lan]` alone enables it too.
        let lan_listen = match (lan, config.lan.as_ref()) {
            (Some(addr), _) if !addr.is_empty() => Some(addr),
            (Some(_), Some(c)) | (None, Some(c)) => Some(c.listen.clone()),
            (Some(_), None) => Some("0.0.0.0:8478".to_owned()),
            (None, None) => None,
        };
        let advertise = !no_mdns && config.lan.as_ref().is_none_or(|c| c.mdns);
        let policy = config.session_policy();
        let service = Service::start_scanning(home.clone(), config, scan, policy)?;
        tracing::info!("terminull bridge up: home {}, socket {}", home.root().display(), home.socket().display());
        let server = tokio::spawn(local::serve(service.clone(), listener));
        let reviver = service.clone();
        tokio::spawn(async move {
            for id in reviver.revive_pending_work().await {
                tracing::info!(session = %id, "revived: it has messages queued or a terminal to watch");
            }
        });
        // New or changed drop-ins are picked up without a restart.
        let watcher = tokio::spawn(service.clone().watch_drop_ins(Duration::from_secs(2)));
        let relay_url = relay.or(config_relay);
        let ctx = if relay_url.is_some() || lan_listen.is_some() {
            let identity = terminull_bridge::devices::bridge_identity(&home)?;
            tracing::info!("bridge id {}", identity.public().bridge_id());
            let devices = terminull_bridge::devices::DeviceRegistry::open(&home);
            Some(terminull_bridge::relay_client::context(identity, devices, service.clone()))
        } else {
            None
        };
        let relay_task = match (&relay_url, &ctx) {
            (Some(url), Some(ctx)) => {
                tracing::info!("relay {url}");
                Some(tokio::spawn(terminull_bridge::relay_client::run(
                    ctx.clone(),
                    home.clone(),
                    url.clone(),
                    Default::default(),
                )))
            }
            _ => None,
        };
        let lan_server = match (&lan_listen, &ctx) {
            (Some(listen), Some(ctx)) => {
                let addr: std::net::SocketAddr = listen.parse().with_context(|| format!("LAN address `{listen}`"))?;
                let config = terminull_bridge::lan::LanConfig::new(addr);
                let server = terminull_bridge::lan::start(ctx.clone(), home.clone(), config)
                    .await
                    .with_context(|| format!("binding the LAN server on {addr}"))?;
                if let Some(url) = terminull_bridge::lan::device_url(server.addr()) {
                    let file = home.lan_url_file();
                    terminull_net::private_file::write_private(&file, url.as_bytes())
                        .with_context(|| format!("writing {}", file.display()))?;
                }
                Some(server)
            }
            _ => None,
        };
        // Withdrawn (a goodbye packet) when dropped at shutdown.
        let _advertisement = match (&lan_server, &ctx) {
            (Some(server), Some(ctx)) if advertise => {
                use terminull_net::mdns::{self, MdnsScope};
                let advert =
                    terminull_protocol::lan::LanAdvert::new(ctx.identity.public().bridge_id(), server.addr().port());
                let scope =
                    if server.addr().ip().is_loopback() { MdnsScope::LoopbackOnly } else { MdnsScope::AllInterfaces };
                match mdns::advertise(&advert, server.addr().ip(), scope) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        tracing::warn!("cannot advertise the LAN server by mDNS ({e}); devices need its address");
                        None
                    }
                }
            }
            _ => None,
        };
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutting down");
        server.abort();
        watcher.abort();
        if let Some(task) = relay_task {
            task.abort();
        }
        drop(_advertisement);
        if let Some(server) = lan_server {
            server.stop();
            let _ = std::fs::remove_file(home.lan_url_file());
        }
        service.shutdown().await;
        let _ = std::fs::remove_file(home.socket());
        Ok(ExitCode::SUCCESS)
    })
}

pub(crate) fn agents(json: bool, home: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    let config = home.load_config()?;
    let registry = runtime()?.block_on(registry::scan(&ScanOptions::new(home, config)));
    if json {
        write_stdout(&serde_json::to_string_pretty(&registry).context("encoding the registry")?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = format!("{:<14} {:<20} {:<9} {:<28} {}\n", "AGENT", "NAME", "SOURCE", "DETECTED", "CAPABILITIES");
    for agent in &registry.agents {
        let d = &agent.declaration;
        let source = match agent.source {
            Source::BuiltIn { .. } => "built-in",
            Source::DropIn { .. } => "drop-in",
            Source::AcpConfig { .. } => "acp",
        };
        let detected = match (&agent.detected.installed, &agent.detected.version, &agent.detected.reason) {
            (true, Some(v), _) => v.clone(),
            (true, None, _) => "installed".to_owned(),
            (false, _, Some(why)) => format!("not installed: {why}"),
            (false, _, None) => "not installed".to_owned(),
        };
        out.push_str(&format!(
            "{:<14} {:<20} {:<9} {:<28} {}\n",
            d.agent_id.as_str(),
            d.display_name,
            source,
            detected,
            registry::capability_summary(d)
        ));
        if let Source::DropIn { path } = &agent.source {
            out.push_str(&format!("{:<14} from {}\n", "", path.display()));
        }
        if let Source::AcpConfig { command, .. } = &agent.source {
            out.push_str(&format!("{:<14} ACP agent from config.toml: {}\n", "", command.join(" ")));
        }
        if let Some(note) = d.verification_note() {
            out.push_str(&format!("{:<14} {note}\n", ""));
        }
    }
    if registry.agents.is_empty() {
        out.push_str("(no agents)\n");
    }
    for r in &registry.refused {
        out.push_str(&format!("refused {} {}: {}\n", r.kind, r.path.display(), r.reason));
    }
    write_stdout(out.trim_end())?;
    Ok(ExitCode::SUCCESS)
}
