//! The mirror: the terminal's own turns, read from the agent's transcript through the
//! `mirror` hook from a saved cursor, published read-only (marked with
//! [`MIRRORED_META`]) so the app shows what the terminal did.

use terminull_protocol::adapter::{self as proto, HandoffHook};
use terminull_protocol::blocks::BlockKind;
use terminull_protocol::blocks::MIRRORED_META;

use super::actor::Actor;
use crate::host::HostedAdapter;

impl Actor {
    /// Publishes the transcript entries the terminal wrote since the cursor.
    pub(super) async fn mirror(&mut self) {
        self.read_mirror(true).await;
    }

    /// Moves the mirror's cursor to the end of the transcript without publishing, so
    /// terminull's own turns are not mirrored back.
    pub(super) async fn skip_mirror(&mut self) {
        self.read_mirror(false).await;
    }

    pub(super) async fn read_mirror(&mut self, publish: bool) {
        if !self.has_hook(HandoffHook::Mirror) || self.spec.meta.agent_session_id.is_none() {
            return;
        }
        match self.hook_process().await {
            Ok(mut adapter) => {
                self.read_mirror_on(&adapter, publish).await;
                adapter.shutdown().await;
            }
            Err(e) => tracing::warn!(session = %self.spec.meta.session_id, "mirror: {e}"),
        }
    }

    /// Reads the transcript from the cursor to its end (a huge one over a few calls,
    /// bounded; the rest at the next poll), publishing the blocks when `publish`.
    pub(super) async fn read_mirror_on(&mut self, adapter: &HostedAdapter, publish: bool) {
        if !self.has_hook(HandoffHook::Mirror) {
            return;
        }
        let Some(sid) = self.spec.meta.agent_session_id.clone() else { return };
        for _ in 0..8 {
            let params = proto::MirrorParams {
                cwd: self.spec.meta.cwd.clone(),
                agent_session_id: sid.clone(),
                cursor: self.pending.mirror_cursor.clone(),
            };
            match self.hook_on::<proto::Mirror>(adapter, &params).await {
                Ok(r) => {
                    let done = r.blocks.is_empty() || Some(&r.cursor) == self.pending.mirror_cursor.as_ref();
                    self.pending.mirror_cursor = Some(r.cursor);
                    if publish {
                        for mut block in r.blocks {
                            if matches!(block.kind, BlockKind::SessionState(_) | BlockKind::AgentInfo(_)) {
                                continue;
                            }
                            block.seq = None;
                            block.meta.get_or_insert_with(Default::default).insert(MIRRORED_META.into(), true.into());
                            self.publish_block(block);
                        }
                    }
                    if done {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(session = %self.spec.meta.session_id, "mirror failed: {e}");
                    return;
                }
            }
        }
    }
}
