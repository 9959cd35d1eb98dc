//! A refusal: what the relay answers a frame or a connection it will not serve.

use terminull_protocol::relay::RelayErrorCode;
use terminull_protocol::{BridgeId, DeviceId};

/// Why the relay refuses: the code and message of the `error` frame the peer gets (or
/// of the close that ends its connection).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Refusal {
    /// The `error` frame's code.
    pub(crate) code: RelayErrorCode,
    /// Detail for a person.
    pub(crate) message: String,
}

impl Refusal {
    /// A refusal with this code and message.
    pub(crate) fn new(code: RelayErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    /// The frame is malformed or breaks a rule of the protocol.
    pub(crate) fn bad_frame(message: impl Into<String>) -> Self {
        Self::new(RelayErrorCode::BadFrame, message)
    }

    /// The relay is stopping and takes no new work.
    pub(crate) fn shutting_down() -> Self {
        Self::new(RelayErrorCode::BridgeOffline, "the relay is shutting down")
    }

    /// The bridge a frame is for holds no connection.
    pub(crate) fn bridge_offline() -> Self {
        Self::new(RelayErrorCode::BridgeOffline, "the bridge is not connected")
    }

    /// No bridge of that id ever registered here.
    pub(crate) fn unregistered_bridge(bridge_id: &BridgeId) -> Self {
        Self::new(RelayErrorCode::UnknownDevice, format!("bridge `{bridge_id}` is not registered at this relay"))
    }

    /// The device is not (or no longer) paired with the bridge.
    pub(crate) fn unpaired_device(device_id: &DeviceId, bridge_id: &BridgeId) -> Self {
        Self::new(
            RelayErrorCode::UnknownDevice,
            format!("device `{device_id}` is not paired with bridge `{bridge_id}`"),
        )
    }
}
