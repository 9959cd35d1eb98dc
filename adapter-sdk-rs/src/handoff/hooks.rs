//! The five handoff hooks as one trait an adapter implements once.
//!
//! The bridge calls the hooks an adapter declares (see
//! [docs/session-handoff.md](../../../docs/session-handoff.md) and the hook methods in
//! [docs/adapter-protocol.md](../../../docs/adapter-protocol.md#54-handoff-hooks)):
//! `scan_external_sessions`, `is_cwd_externally_owned`, `mirror`, `latest_sid_for_cwd`,
//! `terminal_resume_command`, and `release` on a persistent adapter's session. The
//! first five are class-level (no session is needed), so they are the [`Handoff`] an
//! adapter returns from [`Adapter::handoff`](crate::Adapter::handoff); `release` is
//! [`Adapter::release`](crate::Adapter::release).
//!
//! Most agents keep their sessions as files under one directory (`~/.codex`,
//! `~/.claude`, `~/.factory`, …): those implement [`SessionFiles`], which finds that
//! directory once per call and is a [`Handoff`] through the blanket impl.

use std::future::Future;
use std::path::{Path, PathBuf};

use terminull_protocol::adapter::{
    ExternalSession, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, LatestSidForCwdParams,
    LatestSidForCwdResult, MirrorParams, MirrorResult, ScanExternalSessionsParams, TerminalResumeCommandParams,
    TerminalResumeCommandResult,
};

use serde_json::Value;
use terminull_protocol::BlockKind;

use super::{AgentHome, SessionIds, latest_by_scan, mirror_jsonl, owned_by_cli};
use crate::error::AdapterError;

/// The class-level handoff hooks of one agent. The serve loop calls only the hooks in
/// the adapter's `HANDOFF_HOOKS`. The futures are `Send` so that the serve loop of a
/// concrete adapter stays `Send` (tests and hosts may `tokio::spawn` it).
pub trait Handoff: Send + Sync {
    /// Sessions the agent's CLI started outside the bridge.
    fn scan_external_sessions(
        &self,
        params: ScanExternalSessionsParams,
    ) -> impl Future<Output = Result<Vec<ExternalSession>, AdapterError>> + Send;

    /// Does a native agent process drive this directory now.
    fn is_cwd_externally_owned(
        &self,
        params: IsCwdExternallyOwnedParams,
    ) -> impl Future<Output = Result<IsCwdExternallyOwnedResult, AdapterError>> + Send;

    /// Read-only tail of a terminal-owned transcript.
    fn mirror(&self, params: MirrorParams) -> impl Future<Output = Result<MirrorResult, AdapterError>> + Send;

    /// The lineage head of a directory after a terminal hand-back.
    fn latest_sid_for_cwd(
        &self,
        params: LatestSidForCwdParams,
    ) -> impl Future<Output = Result<LatestSidForCwdResult, AdapterError>> + Send;

    /// The command that continues a session in a terminal.
    fn terminal_resume_command(
        &self,
        params: TerminalResumeCommandParams,
    ) -> impl Future<Output = Result<TerminalResumeCommandResult, AdapterError>> + Send;
}

/// The handoff of an agent that keeps its sessions in files under one directory. What
/// is the agent's own: where that directory is ([`HOME`](Self::HOME)), what its session
/// ids look like ([`IDS`](Self::IDS)), how a scan describes its files
/// ([`scan`](Self::scan)), which file is a session's transcript
/// ([`session_path`](Self::session_path)) and what its records mean
/// ([`record_blocks`](Self::record_blocks)), and its CLI's command line ([`CLI`](Self::CLI),
/// [`RESUME_ARGS`](Self::RESUME_ARGS), [`drives`](Self::drives)). The rest is
/// defaulted from those, and every read of the files is bounded (they are untrusted;
/// see the readers in [`crate::handoff`]).
pub trait SessionFiles {
    /// Where the agent keeps its state (`~/.codex`, or `$CODEX_HOME`).
    const HOME: AgentHome;

    /// The agent's session ids. An id is checked against them before it goes into a
    /// path or a command line.
    const IDS: SessionIds;

    /// The agent's CLI as a terminal runs it (`codex`): the program of the resume
    /// command, and the process name [`is_owned`](Self::is_owned) looks for.
    const CLI: &'static str;

    /// What stands between [`CLI`](Self::CLI) and the session id in the command that
    /// resumes a session interactively (`["--resume"]`, `["resume"]`).
    const RESUME_ARGS: &'static [&'static str];

    /// The directory the sessions are under; an error when it cannot be found (no HOME).
    fn root(&self) -> Result<PathBuf, AdapterError> {
        Self::HOME.require()
    }

    /// `scan_external_sessions` under `root`: see [`super::newest_first`].
    fn scan(&self, root: &Path, params: &ScanExternalSessionsParams) -> Vec<ExternalSession>;

    /// `latest_sid_for_cwd` under `root`. Default: the newest session [`scan`](Self::scan)
    /// finds for the directory (a terminal's `--resume` may have minted a new id).
    fn latest(&self, root: &Path, params: &LatestSidForCwdParams) -> LatestSidForCwdResult {
        latest_by_scan(params, |scan_params| self.scan(root, scan_params))
    }

    /// Whether a command line of [`CLI`](Self::CLI) may be driving session `sid` (any
    /// session without one). Default: every command line may, so any such process in
    /// the directory owns it.
    fn drives(argv: &[String], sid: Option<&str>) -> bool {
        let _ = (argv, sid);
        true
    }

    /// `is_cwd_externally_owned`. Default: a [`CLI`](Self::CLI) process in the
    /// directory that [`drives`](Self::drives) the session; see [`super::owned_by_cli`].
    fn is_owned(&self, params: &IsCwdExternallyOwnedParams) -> IsCwdExternallyOwnedResult {
        owned_by_cli(&[Self::CLI], params, Self::drives)
    }

    /// The transcript of session `id` (already checked against [`IDS`](Self::IDS)) that
    /// ran in `cwd`, under `root`; a `not_found` error when there is none.
    fn session_path(&self, root: &Path, cwd: &str, id: &str) -> Result<PathBuf, AdapterError>;

    /// The blocks of one transcript record (the mirror marks them
    /// [`mirrored`](super::mirrored)); none for bookkeeping records.
    fn record_blocks(record: &Value) -> Vec<BlockKind>;

    /// `mirror`: the session's transcript after the cursor, as blocks. Default: the
    /// JSONL file [`session_path`](Self::session_path) names, read by
    /// [`super::mirror_jsonl`].
    fn read_mirror(&self, root: &Path, params: &MirrorParams) -> Result<MirrorResult, AdapterError> {
        let id = Self::IDS.check(params.agent_session_id.as_str())?;
        let path = self.session_path(root, &params.cwd, id)?;
        mirror_jsonl(&path, params.cursor.as_deref(), Self::record_blocks)
    }

    /// `terminal_resume_command`: the agent's interactive CLI, resuming the session
    /// (`<CLI> <RESUME_ARGS…> <id>`) in the directory asked for.
    fn resume_command(
        &self,
        params: &TerminalResumeCommandParams,
    ) -> Result<TerminalResumeCommandResult, AdapterError> {
        let id = Self::IDS.check(params.agent_session_id.as_str())?;
        let argv = [Self::CLI].iter().chain(Self::RESUME_ARGS).chain([&id]).map(|a| (*a).to_owned()).collect();
        Ok(TerminalResumeCommandResult { argv, cwd: params.cwd.clone() })
    }
}

impl<S: SessionFiles + Send + Sync> Handoff for S {
    async fn scan_external_sessions(
        &self,
        params: ScanExternalSessionsParams,
    ) -> Result<Vec<ExternalSession>, AdapterError> {
        Ok(self.scan(&self.root()?, &params))
    }

    async fn is_cwd_externally_owned(
        &self,
        params: IsCwdExternallyOwnedParams,
    ) -> Result<IsCwdExternallyOwnedResult, AdapterError> {
        Ok(self.is_owned(&params))
    }

    async fn mirror(&self, params: MirrorParams) -> Result<MirrorResult, AdapterError> {
        self.read_mirror(&self.root()?, &params)
    }

    async fn latest_sid_for_cwd(&self, params: LatestSidForCwdParams) -> Result<LatestSidForCwdResult, AdapterError> {
        Ok(self.latest(&self.root()?, &params))
    }

    async fn terminal_resume_command(
        &self,
        params: TerminalResumeCommandParams,
    ) -> Result<TerminalResumeCommandResult, AdapterError> {
        self.resume_command(&params)
    }
}

/// The handoff of an adapter without one: [`Adapter::handoff`](crate::Adapter::handoff)'s
/// default. Never called (an adapter without hooks declares none).
#[derive(Debug, Clone, Copy)]
pub enum NoHandoff {}

impl Handoff for NoHandoff {
    async fn scan_external_sessions(
        &self,
        _: ScanExternalSessionsParams,
    ) -> Result<Vec<ExternalSession>, AdapterError> {
        match *self {}
    }

    async fn is_cwd_externally_owned(
        &self,
        _: IsCwdExternallyOwnedParams,
    ) -> Result<IsCwdExternallyOwnedResult, AdapterError> {
        match *self {}
    }

    async fn mirror(&self, _: MirrorParams) -> Result<MirrorResult, AdapterError> {
        match *self {}
    }

    async fn latest_sid_for_cwd(&self, _: LatestSidForCwdParams) -> Result<LatestSidForCwdResult, AdapterError> {
        match *self {}
    }

    async fn terminal_resume_command(
        &self,
        _: TerminalResumeCommandParams,
    ) -> Result<TerminalResumeCommandResult, AdapterError> {
        match *self {}
    }
}
