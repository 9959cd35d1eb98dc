//! Pairing devices with this bridge, listing and revoking them, and pairing this machine
//! as a device of another bridge.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use terminull_bridge::home::Home;

use crate::args::DevicesAction;
use crate::{runtime, write_stdout};

/// How `terminull pair` ends: whether it waits, and whether the short code must be
/// confirmed on this terminal before the device is usable.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Confirm {
    /// Return once the link is shown (only with `yes`).
    pub(crate) no_wait: bool,
    /// Accept the device without asking.
    pub(crate) yes: bool,
}

pub(crate) fn pair(
    home: Option<PathBuf>,
    relay: Option<String>,
    lan: Option<String>,
    ttl: u64,
    confirm: Confirm,
    json: bool,
) -> anyhow::Result<ExitCode> {
    use terminull_bridge::devices;
    use terminull_protocol::crypto::pairing::PairingLink;
    let home = Home::resolve(home)?;
    let config = home.load_config()?;
    let relay = relay.or(config.relay.map(|r| r.url));
    // The running daemon's LAN server, as it computed its address at start.
    let lan = lan.or_else(|| std::fs::read_to_string(home.lan_url_file()).ok().map(|u| u.trim().to_owned()));
    let base = match (&relay, &lan) {
        (Some(url), _) | (None, Some(url)) => terminull_net::Endpoint::parse(url)?.http_base(),
        (None, None) => anyhow::bail!(
            "no way for a device to reach this bridge: run `terminull up --lan` (or pass --lan ws://ADDR:PORT), or pass --relay URL / set `[relay] url` in config.toml"
        ),
    };
    let identity = devices::bridge_identity(&home)?;
    let ask = !(confirm.yes || confirm.no_wait);
    let (secret, expires_at) = devices::create_offer_with(&home, ttl, ask)?;
    let public = identity.public();
    let link = PairingLink { bridge_id: public.bridge_id(), bridge: public.to_wire(), relay, lan, secret, expires_at };
    let url = link.to_url(&base);
    if json {
        write_stdout(
            &serde_json::json!({"link": url, "pairing_id": link.pairing_id(), "expires_at": expires_at}).to_string(),
        )?;
    } else {
        let qr = qrcode::QrCode::new(url.as_bytes()).context("encoding the QR code")?;
        let art = qr.render::<qrcode::render::unicode::Dense1x2>().quiet_zone(true).build();
        write_stdout(&format!(
            "{art}\nScan the QR code with the phone's camera, or open this link on the phone (it opens the terminull web page):\n\n{url}\n\nFrom another computer with terminull, run instead:\n  terminull device pair '{url}'\n\nThe offer is valid for {ttl} s and can pair one device. The bridge must be running (`terminull up`) to answer.",
        ))?;
    }
    if confirm.no_wait {
        return Ok(ExitCode::SUCCESS);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(ttl);
    while std::time::Instant::now() < deadline {
        let Some(result) = devices::offer_result(&home, &secret) else {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        if result.pending.is_none() {
            write_stdout(&format!(
                "Paired \"{}\" ({}) without confirmation (--yes).\nShort code: {}  — check that the device shows the same code; if not, run `terminull devices revoke {}`.",
                result.name, result.device_id, result.short_code, result.device_id
            ))?;
            return Ok(ExitCode::SUCCESS);
        }
        return confirm_on_terminal(&home, &secret, &result);
    }
    anyhow::bail!("no device paired within {ttl} s; the offer has expired")
}

/// Asks whether the device shows the same short code; only a `y`/`yes` makes it usable.
fn confirm_on_terminal(
    home: &Home,
    secret: &[u8; 32],
    result: &terminull_bridge::devices::PairingResult,
) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let registry = terminull_bridge::devices::DeviceRegistry::open(home);
    let mut out = std::io::stdout().lock();
    write!(
        out,
        "Device \"{}\" ({}) answered the offer.\nDoes the device show {}? [y/N] ",
        result.name, result.device_id, result.short_code
    )?;
    out.flush()?;
    drop(out);
    let mut answer = String::new();
    // End of input (no terminal) is a no.
    let _ = std::io::stdin().read_line(&mut answer);
    let accept = matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes");
    terminull_bridge::devices::confirm_pairing(home, &registry, secret, accept)?;
    if accept {
        write_stdout(&format!("Paired \"{}\" ({}).", result.name, result.device_id))?;
        Ok(ExitCode::SUCCESS)
    } else {
        write_stdout(&format!(
            "Not paired: \"{}\" ({}) stays refused. If the codes differed, someone else used the link; run `terminull pair` again.",
            result.name, result.device_id
        ))?;
        Ok(ExitCode::FAILURE)
    }
}

pub(crate) fn devices(home: Option<PathBuf>, action: Option<DevicesAction>, json: bool) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    let registry = terminull_bridge::devices::DeviceRegistry::open(&home);
    if let Some(DevicesAction::Revoke { device }) = action {
        let record = registry.revoke(&device)?;
        write_stdout(&format!(
            "revoked {} ({}); it can do nothing from its next message on",
            record.device_id, record.name
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    let (devices, _) = registry.snapshot();
    if json {
        write_stdout(&serde_json::to_string_pretty(&devices)?)?;
    } else {
        let mut out = format!("{:<22} {:<24} {}\n", "DEVICE", "NAME", "STATE");
        for d in &devices {
            out.push_str(&format!(
                "{:<22} {:<24} {}\n",
                d.device_id,
                d.name,
                if d.revoked { "revoked" } else { "active" }
            ));
        }
        write_stdout(out.trim_end())?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn device_pair(
    home: Option<PathBuf>,
    link: &str,
    name: &str,
    no_discover: bool,
) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    let device = terminull_client::home::DeviceHome::at(home.device_dir());
    let discover = (!no_discover).then_some(terminull_client::mdns::MdnsScope::AllInterfaces);
    let paired = runtime()?.block_on(terminull_client::pairing::pair(&device, link, name, discover))?;
    write_stdout(&format!(
        "Paired with bridge {}.\nShort code: {}  — check that the bridge shows the same code; confirm it there if it asks (until then the bridge refuses this device).",
        paired.bridge_id, paired.short_code
    ))?;
    Ok(ExitCode::SUCCESS)
}
