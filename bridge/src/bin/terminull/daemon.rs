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
                let config = terminull_bridge::lan::LanConfig {
                    relay: relay_url.clone(),
                    ..terminull_bridge::lan::LanConfig::new(addr)
                };
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
        let lan_url = lan_server.as_ref().and_then(|server| terminull_bridge::lan::device_url(server.addr()));
        // Stdout may be closed (a service): the daemon runs on regardless.
        let _ = write_stdout(&next_steps(lan_url.as_deref(), relay_url.as_deref()));
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

/// What `terminull up` tells the user once it serves: the address(es) a phone opens
/// (the LAN server's and the relay's web page) and what to do next.
pub(crate) fn next_steps(lan: Option<&str>, relay: Option<&str>) -> String {
    let page = |url: &str| {
        let base = terminull_net::Endpoint::parse(url).map(|e| e.http_base()).unwrap_or_else(|_| url.to_owned());
        // The scheme's own port goes without saying.
        let base = match base.strip_suffix(":443") {
            Some(host) if host.starts_with("https://") => host.to_owned(),
            _ => match base.strip_suffix(":80") {
                Some(host) if host.starts_with("http://") => host.to_owned(),
                _ => base,
            },
        };
        format!("{base}/")
    };
    let mut lines = vec!["terminull is up.".to_owned()];
    if let Some(lan) = lan {
        lines.push(format!("  phone on this network: {}", page(lan)));
    }
    if let Some(relay) = relay {
        lines.push(format!("  phone anywhere, through the relay: {}", page(relay)));
    }
    if lan.is_none() && relay.is_none() {
        lines.push(
            "  only this machine can reach it: `terminull chat AGENT` here; for a phone, run `terminull up --lan` or set a relay"
                .to_owned(),
        );
    } else {
        lines.push(
            "Next: in another terminal, `terminull pair` shows the QR code and link that pair a phone.".to_owned(),
        );
    }
    lines.push(
        "Talk to an agent here with `terminull chat AGENT` (`terminull agents` lists them). Ctrl-C stops.".to_owned(),
    );
    lines.join("\n")
}

pub(crate) fn agents(json: bool, home: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    let config = home.load_config()?;
    let registry = runtime()?.block_on(registry::scan(&ScanOptions::new(home, config)));
    if json {
        write_stdout(&serde_json::to_string_pretty(&registry).context("encoding the registry")?)?;
        return Ok(ExitCode::SUCCESS);
    }
    // One row per agent, then its notes indented under it; columns as wide as their widest cell.
    let mut rows: Vec<([String; 5], Vec<String>)> = Vec::new();
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
            (false, _, Some(_)) | (false, _, None) => "not installed".to_owned(),
        };
        let mut notes = Vec::new();
        if let (false, Some(why)) = (agent.detected.installed, &agent.detected.reason) {
            notes.push(why.clone());
        }
        if let Source::DropIn { path } = &agent.source {
            notes.push(format!("from {}", path.display()));
        }
        if let Source::AcpConfig { command, .. } = &agent.source {
            notes.push(format!("ACP agent from config.toml: {}", command.join(" ")));
        }
        if let Some(note) = d.verification_note() {
            notes.push(note.to_string());
        }
        let cells = [
            d.agent_id.as_str().to_owned(),
            d.display_name.clone(),
            source.to_owned(),
            detected,
            registry::capability_summary(d).to_string(),
        ];
        rows.push((cells, notes));
    }
    let header = ["AGENT", "NAME", "SOURCE", "DETECTED", "CAPABILITIES"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.chars().count());
    for (cells, _) in &rows {
        for (w, cell) in widths.iter_mut().zip(cells) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String; 5]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<w$}  "));
            }
        }
        text.trim_end().to_owned() + "\n"
    };
    let mut out = line(&header);
    for (cells, notes) in &rows {
        out.push_str(&line(cells));
        for note in notes {
            out.push_str(&format!("{:w$}  {note}\n", "", w = widths[0]));
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

#[cfg(test)]
mod tests {
    use super::next_steps;

    #[test]
    fn up_names_the_phone_pages_and_the_next_step() {
        let both = next_steps(Some("ws://192.168.1.20:8478"), Some("wss://relay.example"));
        assert!(both.contains("phone on this network: http://192.168.1.20:8478/"), "{both}");
        assert!(both.contains("through the relay: https://relay.example/"), "{both}");
        assert!(both.contains("`terminull pair`"), "{both}");
        let neither = next_steps(None, None);
        assert!(neither.contains("terminull up --lan") && !neither.contains("terminull pair"), "{neither}");
    }
}
