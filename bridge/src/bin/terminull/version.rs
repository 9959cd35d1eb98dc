//! `terminull --version`: the version, the protocol versions this build speaks, and the
//! built-in adapter executables found (next to `terminull` first, then on PATH: how the
//! daemon looks for them). Found, not started: `terminull agents` checks and detects them.

use std::path::{Path, PathBuf};

use terminull_bridge::registry::{ACP_HOST, BUILT_INS, find_built_in};

/// One built-in adapter executable and where it was found.
#[derive(Debug, Clone)]
pub(crate) struct FoundAdapter {
    /// The agent id it serves (`acp` for the host of config.toml's ACP agents).
    pub(crate) agent_id: &'static str,
    /// The executable's file name.
    pub(crate) executable: &'static str,
    /// Where it was found, if anywhere.
    pub(crate) path: Option<PathBuf>,
}

/// The directory of the running `terminull`.
pub(crate) fn exe_dir() -> Option<PathBuf> {
    std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf))
}

/// Every built-in adapter executable (and the ACP host), found or not.
pub(crate) fn found_adapters() -> Vec<FoundAdapter> {
    let dir = exe_dir();
    BUILT_INS
        .iter()
        .map(|b| (b.agent_id, b.executable))
        .chain(std::iter::once(("acp", ACP_HOST)))
        .map(|(agent_id, executable)| FoundAdapter {
            agent_id,
            executable,
            path: find_built_in(executable, dir.as_deref()),
        })
        .collect()
}

/// The text `terminull --version` prints.
pub(crate) fn long_version() -> String {
    use terminull_protocol::adapter::{OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION};
    let mut out = format!(
        "terminull {}\nprotocols: adapter v{PROTOCOL_VERSION} (accepts v{OLDEST_PROTOCOL_VERSION}-v{PROTOCOL_VERSION}), \
         device/relay v{}\n",
        env!("CARGO_PKG_VERSION"),
        terminull_protocol::relay::PROTOCOL_VERSION
    );
    let adapters = found_adapters();
    let found = adapters.iter().filter(|a| a.path.is_some()).count();
    let dir = exe_dir().map(|d| d.display().to_string()).unwrap_or_else(|| "?".to_owned());
    out.push_str(&format!(
        "adapters: {found} of {} found (next to terminull in {dir}, then on PATH)\n",
        adapters.len()
    ));
    for a in &adapters {
        let at = match &a.path {
            Some(p) => p.display().to_string(),
            None => "not found: run scripts/install.sh (docs/install.md)".to_owned(),
        };
        out.push_str(&format!("  {:<12} {:<22} {at}\n", a.agent_id, a.executable));
    }
    out.trim_end().to_owned()
}

/// When the command line is `terminull --version` (or `-V`), the text to print. Handled
/// before clap, which prints a fixed string: the adapters found are known at run time.
pub(crate) fn requested() -> Option<String> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match args.as_slice() {
        [one] if one == "--version" || one == "-V" => Some(long_version()),
        _ => None,
    }
}
