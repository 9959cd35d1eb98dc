//! The app signature a bridge hands over in `register` (`register.app`): checked
//! against the bridge's key, kept in memory with the bridge (so bounded by
//! `max_bridges`), served unchanged at `GET /v1/bridges/{id}/app-signature` for the
//! phone app's service worker (docs/web-client.md#app-code-integrity).

use terminull_protocol::BridgeId;
use terminull_protocol::crypto::app_code::{AppSignature, verify_shell};
use terminull_protocol::crypto::keys::PublicIdentity;
use terminull_protocol::relay::Register;

use super::Hub;

/// `register.app` when it verifies under the registering bridge's key; a bad one is
/// dropped with a warning (the bridge still registers: the app then refuses updates
/// from this relay until the bridge sends a good one, which is the safe side).
pub(super) fn checked(reg: &Register) -> Option<AppSignature> {
    let signature = reg.app.as_deref()?;
    let verdict = PublicIdentity::from_wire(&reg.keys).and_then(|key| verify_shell(&key, signature));
    match verdict {
        Ok(_) => Some(signature.clone()),
        Err(e) => {
            tracing::warn!(bridge_id = %reg.bridge_id, "register.app: {e}; not served");
            None
        }
    }
}

impl Hub {
    /// The app signature the bridge `bridge_id` sent when it last registered.
    pub(crate) fn app_signature(&self, bridge_id: &BridgeId) -> Option<AppSignature> {
        self.lock().bridges.get(bridge_id).and_then(|b| b.app.clone())
    }
}
