//! `terminull service install|uninstall|status|logs`: the daemon as a background service
//! of the user, a systemd user unit on Linux, a launchd agent on macOS (docs/bridge.md).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context;
use clap::{Args, Subcommand};
use terminull_bridge::home::Home;

use crate::service_unit::{
    LAUNCHD_LABEL, SYSTEMD_UNIT, ServiceSpec, launchd_plist, launchd_plist_path, systemd_unit, systemd_unit_path,
};
use crate::write_stdout;

#[derive(Debug, Subcommand)]
pub(crate) enum ServiceCommand {
    /// Write the service file and start the daemon now and at every login.
    Install(InstallArgs),
    /// Stop the service and remove its file.
    Uninstall(CommonArgs),
    /// Whether the service is installed and running (the service manager's own status).
    Status(CommonArgs),
    /// The daemon's log (the journal on Linux, the log file on macOS).
    Logs(LogsArgs),
}

/// Flags every `service` subcommand takes.
#[derive(Debug, Clone, Args)]
pub(crate) struct CommonArgs {
    /// Print what would be written and run, and change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// A launchd agent (macOS; the default there) instead of a systemd user unit.
    #[arg(long, conflicts_with = "systemd")]
    pub(crate) launchd: bool,
    /// A systemd user unit (the default everywhere but macOS).
    #[arg(long)]
    pub(crate) systemd: bool,
}

#[derive(Debug, Args)]
pub(crate) struct InstallArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// The bridge's home the service uses (default: $TERMINULL_HOME, else ~/.terminull).
    #[arg(long, value_name = "DIR")]
    pub(crate) home: Option<PathBuf>,
    /// `terminull up --relay URL` in the service.
    #[arg(long, value_name = "URL")]
    pub(crate) relay: Option<String>,
    /// `terminull up --lan [ADDR]` in the service.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
    pub(crate) lan: Option<String>,
    /// Write the file but neither enable nor start the service.
    #[arg(long)]
    pub(crate) no_start: bool,
}

#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// How many of the last lines.
    #[arg(short = 'n', long, default_value_t = 100)]
    pub(crate) lines: u32,
    /// Keep printing new lines.
    #[arg(short, long)]
    pub(crate) follow: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Manager {
    Systemd,
    Launchd,
}

fn manager(common: &CommonArgs) -> Manager {
    if common.launchd || (cfg!(target_os = "macos") && !common.systemd) { Manager::Launchd } else { Manager::Systemd }
}

fn user_home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set: the service file goes under your home directory")
}

const LINGER_NOTE: &str = "note: a systemd user service stops when you log out of the last session, unless \
lingering is on for your user: `loginctl enable-linger $USER` (once; `loginctl show-user $USER -p Linger` \
tells). With it the daemon starts at boot and keeps running with nobody logged in.";

/// Runs `argv` (or prints it, dry), failing with what to do when it fails.
fn run(argv: &[String], dry_run: bool) -> anyhow::Result<()> {
    if dry_run {
        return write_stdout(&format!("would run: {}", argv.join(" ")));
    }
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .status()
        .with_context(|| format!("cannot run `{}`: is {} installed?", argv.join(" "), argv[0]))?;
    anyhow::ensure!(status.success(), "`{}` failed ({status})", argv.join(" "));
    Ok(())
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|w| (*w).to_owned()).collect()
}

pub(crate) fn service(command: ServiceCommand) -> anyhow::Result<ExitCode> {
    match command {
        ServiceCommand::Install(args) => install(args),
        ServiceCommand::Uninstall(common) => uninstall(&common),
        ServiceCommand::Status(common) => status(&common),
        ServiceCommand::Logs(args) => logs(&args),
    }
}

fn install(args: InstallArgs) -> anyhow::Result<ExitCode> {
    let common = &args.common;
    let manager = manager(common);
    let user_home = user_home()?;
    let home = Home::resolve(args.home)?;
    let home = std::path::absolute(home.root()).context("making the home's path absolute")?;
    let exe = std::env::current_exe().context("locating the terminull executable")?;
    let mut up_args = Vec::new();
    if let Some(relay) = args.relay {
        up_args.extend(["--relay".to_owned(), relay]);
    }
    if let Some(lan) = args.lan {
        up_args.push("--lan".to_owned());
        if !lan.is_empty() {
            up_args.push(lan);
        }
    }
    let spec = ServiceSpec {
        exe,
        home: home.clone(),
        up_args,
        path_env: std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".to_owned()),
        log_file: user_home.join("Library/Logs/terminull/bridge.log"),
    };
    let (path, text) = match manager {
        Manager::Systemd => (systemd_unit_path(&user_home), systemd_unit(&spec)),
        Manager::Launchd => (launchd_plist_path(&user_home), launchd_plist(&spec)),
    };
    if common.dry_run {
        write_stdout(&format!("would write {}:\n----\n{}----", path.display(), text))?;
    } else {
        if manager == Manager::Launchd {
            anyhow::ensure!(
                cfg!(target_os = "macos"),
                "launchd runs on macOS only; `terminull service install --launchd --dry-run` prints the agent's plist"
            );
            let logs = spec.log_file.parent().unwrap_or(Path::new("/"));
            std::fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
        }
        let dir = path.parent().context("the service file has a directory")?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
        write_stdout(&format!("wrote {}", path.display()))?;
    }
    match manager {
        Manager::Systemd => {
            let no_manager = || {
                format!(
                    "the unit is written ({}), but systemd did not take it: is a systemd user manager \
                     running for you (a login session, or `loginctl enable-linger $USER`)? Then run \
                     `systemctl --user daemon-reload && systemctl --user enable --now {SYSTEMD_UNIT}`",
                    path.display()
                )
            };
            run(&words(&["systemctl", "--user", "daemon-reload"]), common.dry_run).with_context(no_manager)?;
            if !args.no_start {
                run(&words(&["systemctl", "--user", "enable", "--now", SYSTEMD_UNIT]), common.dry_run)
                    .with_context(no_manager)?;
            }
            write_stdout(LINGER_NOTE)?;
            write_stdout(&format!(
                "the daemon runs `terminull up --home {}`; see it with `terminull service status`, \
                 its log with `terminull service logs`",
                home.display()
            ))?;
        }
        Manager::Launchd => {
            if !args.no_start {
                let target = format!("gui/{}", terminull_bridge::home_guard::current_uid());
                run(
                    &["launchctl".to_owned(), "bootstrap".to_owned(), target, path.display().to_string()],
                    common.dry_run,
                )?;
            }
            write_stdout(&format!(
                "launchd starts the daemon at login and restarts it when it fails; its log: {}",
                spec.log_file.display()
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn uninstall(common: &CommonArgs) -> anyhow::Result<ExitCode> {
    let user_home = user_home()?;
    let path = match manager(common) {
        Manager::Systemd => {
            let path = systemd_unit_path(&user_home);
            // Not installed, or already stopped: nothing to stop, not a failure.
            if let Err(e) = run(&words(&["systemctl", "--user", "disable", "--now", SYSTEMD_UNIT]), common.dry_run) {
                write_stdout(&format!("({e}; removing the unit anyway)"))?;
            }
            path
        }
        Manager::Launchd => {
            let target = format!("gui/{}/{LAUNCHD_LABEL}", terminull_bridge::home_guard::current_uid());
            if let Err(e) = run(&["launchctl".to_owned(), "bootout".to_owned(), target], common.dry_run) {
                write_stdout(&format!("({e}; removing the plist anyway)"))?;
            }
            launchd_plist_path(&user_home)
        }
    };
    if common.dry_run {
        write_stdout(&format!("would remove {}", path.display()))?;
    } else {
        match std::fs::remove_file(&path) {
            Ok(()) => write_stdout(&format!("removed {}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                write_stdout(&format!("{} was not there", path.display()))?;
            }
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
    }
    if manager(common) == Manager::Systemd {
        let _ = run(&words(&["systemctl", "--user", "daemon-reload"]), common.dry_run);
    }
    Ok(ExitCode::SUCCESS)
}

fn status(common: &CommonArgs) -> anyhow::Result<ExitCode> {
    let user_home = user_home()?;
    let (path, argv) = match manager(common) {
        Manager::Systemd => (
            systemd_unit_path(&user_home),
            words(&["systemctl", "--user", "status", "--no-pager", "--lines=5", SYSTEMD_UNIT]),
        ),
        Manager::Launchd => (
            launchd_plist_path(&user_home),
            vec![
                "launchctl".to_owned(),
                "print".to_owned(),
                format!("gui/{}/{LAUNCHD_LABEL}", terminull_bridge::home_guard::current_uid()),
            ],
        ),
    };
    if !path.exists() {
        write_stdout(&format!(
            "not installed ({} does not exist): `terminull service install` installs it",
            path.display()
        ))?;
        return Ok(ExitCode::from(3));
    }
    write_stdout(&format!("installed: {}", path.display()))?;
    if common.dry_run {
        write_stdout(&format!("would run: {}", argv.join(" ")))?;
        return Ok(ExitCode::SUCCESS);
    }
    let status = Command::new(&argv[0]).args(&argv[1..]).status().with_context(|| format!("cannot run {}", argv[0]))?;
    // systemctl status: 0 running, 3 not running; passed on for scripts.
    Ok(ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1)))
}

fn logs(args: &LogsArgs) -> anyhow::Result<ExitCode> {
    let lines = args.lines.to_string();
    let argv = match manager(&args.common) {
        Manager::Systemd => {
            let mut argv = words(&["journalctl", "--user", "--unit", SYSTEMD_UNIT, "--no-pager", "--lines"]);
            argv.push(lines);
            if args.follow {
                argv.push("--follow".to_owned());
            }
            argv
        }
        Manager::Launchd => {
            let log = user_home()?.join("Library/Logs/terminull/bridge.log");
            let mut argv = vec!["tail".to_owned(), "-n".to_owned(), lines];
            if args.follow {
                argv.push("-f".to_owned());
            }
            argv.push(log.display().to_string());
            argv
        }
    };
    run(&argv, args.common.dry_run)?;
    Ok(ExitCode::SUCCESS)
}
