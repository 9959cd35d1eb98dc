//! The link handshake (protocol version 3): `link_hello` / `link_accept`, each side
//! contributing a fresh nonce and a fresh **ephemeral** X25519 key signed by its
//! long-term Ed25519 key, and the link keys derived from four Diffie–Hellman
//! results (Noise KK's `ee`, `es`, `se`, `ss`) and the handshake transcript
//! (docs/encryption.md#the-link-control-messages-and-replies,
//! docs/encryption.md#forward-secrecy).
//!
//! Forward secrecy rests on `ee`: it needs one of the two ephemeral secrets, which
//! live only in a [`LinkEphemeral`] (zeroized on drop, never serialized, never
//! cloned). Whoever later steals both long-term identities and holds a recording
//! of the link can compute `es`, `se` and `ss`, but not `ee`, so not the keys.
//! Authentication rests on the signatures over both ephemerals and on `es`, `se`
//! and `ss`, which need the long-term X25519 secrets.

use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use super::channel::{DirectionalKeys, split};
use super::keys::{Identity, PublicIdentity};
use super::{CryptoError, b64, b64url, b64url_array, from_b64, sha256, transcript};
use crate::relay::{LinkAccept, LinkHello, PROTOCOL_VERSION};

/// Label of what the device signs in `link_hello`.
pub const HELLO_LABEL: &[u8] = b"terminull/v3 link-hello";
/// Label of what the bridge signs in `link_accept`.
pub const ACCEPT_LABEL: &[u8] = b"terminull/v3 link-accept";
/// Label of the handshake hash (the HKDF salt).
pub const HASH_LABEL: &[u8] = b"terminull/v3 link-handshake";
/// Label of the link keys' HKDF info.
pub const KEY_LABEL: &[u8] = b"terminull/v3 link-key";

/// One side's ephemeral X25519 key for one link. Its secret is zeroized when this
/// is dropped (x25519-dalek's `zeroize` feature), and it can be neither cloned nor
/// serialized: it exists only between sending one's own handshake message and
/// deriving the link keys.
pub struct LinkEphemeral {
    secret: StaticSecret,
    public: [u8; 32],
}

impl std::fmt::Debug for LinkEphemeral {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkEphemeral").field("public", &b64url(&self.public)).finish()
    }
}

impl LinkEphemeral {
    /// A fresh key from the operating system's CSPRNG.
    pub fn generate() -> Self {
        Self::from_bytes(Zeroizing::new(super::random_bytes::<32>()))
    }

    /// A key from a fixed secret (the test vectors).
    pub fn from_bytes(secret: Zeroizing<[u8; 32]>) -> Self {
        let secret = StaticSecret::from(*secret);
        let public = PublicKey::from(&secret).to_bytes();
        Self { secret, public }
    }

    /// The public key that goes on the wire.
    pub fn public_bytes(&self) -> [u8; 32] {
        self.public
    }

    fn agree(&self, peer: &[u8; 32], what: &'static str) -> Result<Zeroizing<[u8; 32]>, CryptoError> {
        let shared = self.secret.diffie_hellman(&PublicKey::from(*peer));
        if !shared.was_contributory() {
            return Err(CryptoError::BadKey(what));
        }
        Ok(Zeroizing::new(shared.to_bytes()))
    }
}

/// The public values of one handshake: what both signatures and the key schedule
/// cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeFields<'a> {
    /// The bridge.
    pub bridge_id: &'a str,
    /// The device.
    pub device_id: &'a str,
    /// `link_hello.client_nonce`.
    pub client_nonce: [u8; 16],
    /// `link_hello.client_ephemeral`.
    pub client_ephemeral: [u8; 32],
    /// `link_accept.bridge_nonce`.
    pub bridge_nonce: [u8; 16],
    /// `link_accept.bridge_ephemeral`.
    pub bridge_ephemeral: [u8; 32],
}

/// The protocol version as a transcript part (4 bytes, big-endian).
fn version() -> [u8; 4] {
    PROTOCOL_VERSION.to_be_bytes()
}

/// What the device signs: T("terminull/v3 link-hello", u32be(version), bridge_id,
/// device_id, client_nonce(16), client_ephemeral(32)).
pub fn link_hello_bytes(
    bridge_id: &str,
    device_id: &str,
    client_nonce: &[u8; 16],
    client_ephemeral: &[u8; 32],
) -> Vec<u8> {
    transcript(&[HELLO_LABEL, &version(), bridge_id.as_bytes(), device_id.as_bytes(), client_nonce, client_ephemeral])
}

impl HandshakeFields<'_> {
    fn parts<'s>(&'s self, label: &'s [u8], v: &'s [u8; 4]) -> [&'s [u8]; 8] {
        [
            label,
            v,
            self.bridge_id.as_bytes(),
            self.device_id.as_bytes(),
            &self.client_nonce,
            &self.client_ephemeral,
            &self.bridge_nonce,
            &self.bridge_ephemeral,
        ]
    }

    /// What the bridge signs: T("terminull/v3 link-accept", u32be(version),
    /// bridge_id, device_id, client_nonce, client_ephemeral, bridge_nonce,
    /// bridge_ephemeral).
    pub fn accept_bytes(&self) -> Vec<u8> {
        transcript(&self.parts(ACCEPT_LABEL, &version()))
    }

    /// The handshake hash, the link keys' HKDF salt: SHA-256 of
    /// T("terminull/v3 link-handshake", the same seven parts as the accept bytes).
    pub fn hash(&self) -> [u8; 32] {
        sha256(&transcript(&self.parts(HASH_LABEL, &version())))
    }
}

/// The four Diffie–Hellman results of a handshake (device = Noise initiator).
pub struct DhResults {
    /// X25519(device ephemeral, bridge ephemeral): the forward-secret one.
    pub ee: Zeroizing<[u8; 32]>,
    /// X25519(device ephemeral, bridge static).
    pub es: Zeroizing<[u8; 32]>,
    /// X25519(device static, bridge ephemeral).
    pub se: Zeroizing<[u8; 32]>,
    /// X25519(device static, bridge static).
    pub ss: Zeroizing<[u8; 32]>,
}

impl std::fmt::Debug for DhResults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DhResults(..)")
    }
}

/// The link keys: HKDF-SHA256(salt = handshake hash, ikm = ee ‖ es ‖ se ‖ ss,
/// info = T("terminull/v3 link-key", direction, bridge_id, device_id)).
pub fn link_keys(dh: &DhResults, fields: &HandshakeFields<'_>) -> DirectionalKeys {
    let mut ikm = Zeroizing::new([0u8; 128]);
    for (i, part) in [&dh.ee, &dh.es, &dh.se, &dh.ss].into_iter().enumerate() {
        ikm[i * 32..(i + 1) * 32].copy_from_slice(&part[..]);
    }
    split(&fields.hash(), &ikm[..], |d| {
        transcript(&[KEY_LABEL, d.label(), fields.bridge_id.as_bytes(), fields.device_id.as_bytes()])
    })
}

/// The device's half-open handshake: sent `link_hello`, waiting for `link_accept`.
#[derive(Debug)]
pub struct DeviceHandshake {
    bridge_id: String,
    device_id: String,
    client_nonce: [u8; 16],
    ephemeral: LinkEphemeral,
}

impl DeviceHandshake {
    /// Starts a link with fresh randomness: the `link_hello` to send and the state to
    /// finish it with.
    pub fn start(device: &Identity, bridge_id: &str) -> (LinkHello, Self) {
        Self::start_with(device, bridge_id, super::random_bytes::<16>(), LinkEphemeral::generate())
    }

    /// [`Self::start`] with a fixed nonce and ephemeral key (the test vectors).
    pub fn start_with(
        device: &Identity,
        bridge_id: &str,
        client_nonce: [u8; 16],
        ephemeral: LinkEphemeral,
    ) -> (LinkHello, Self) {
        let device_id = device.public().device_id();
        let client_ephemeral = ephemeral.public_bytes();
        let sig = device.sign(&link_hello_bytes(bridge_id, device_id.as_str(), &client_nonce, &client_ephemeral));
        let hello = LinkHello {
            device_id: device_id.clone(),
            client_nonce: b64url(&client_nonce),
            client_ephemeral: b64url(&client_ephemeral),
            sig: b64(&sig),
            conn: None,
        };
        (
            hello,
            Self { bridge_id: bridge_id.to_owned(), device_id: device_id.as_str().to_owned(), client_nonce, ephemeral },
        )
    }

    /// Checks `link_accept` with the bridge's pinned keys (it must be for this device
    /// and sign **this** hello's nonce and ephemeral key, so an accept recorded from
    /// another link is refused) and derives the link keys. Consumes the ephemeral
    /// secret.
    pub fn finish(
        self,
        device: &Identity,
        bridge: &PublicIdentity,
        accept: &LinkAccept,
    ) -> Result<DirectionalKeys, CryptoError> {
        if accept.device_id.as_str() != self.device_id {
            return Err(CryptoError::BadSignature("link_accept (it names another device)"));
        }
        let fields = HandshakeFields {
            bridge_id: &self.bridge_id,
            device_id: &self.device_id,
            client_nonce: self.client_nonce,
            client_ephemeral: self.ephemeral.public_bytes(),
            bridge_nonce: b64url_array("bridge_nonce", &accept.bridge_nonce)?,
            bridge_ephemeral: b64url_array("bridge_ephemeral", &accept.bridge_ephemeral)?,
        };
        bridge.verify(&fields.accept_bytes(), &from_b64("sig", &accept.sig)?, "link_accept")?;
        let bridge_eph = PublicKey::from(fields.bridge_ephemeral);
        let dh = DhResults {
            ee: self.ephemeral.agree(&fields.bridge_ephemeral, "bridge_ephemeral")?,
            es: self.ephemeral.agree(&bridge.x25519.to_bytes(), "bridge x25519")?,
            se: Zeroizing::new(device.agree(&bridge_eph, "bridge_ephemeral")?),
            ss: Zeroizing::new(device.agree(&bridge.x25519, "bridge x25519")?),
        };
        Ok(link_keys(&dh, &fields))
    }
}

/// The bridge's answer to a `link_hello` from `device` (already looked up in the
/// registry): checks the signature over the hello, picks a fresh nonce and
/// ephemeral key, and returns the `link_accept` to send and the link keys.
pub fn accept_hello(
    bridge: &Identity,
    device: &PublicIdentity,
    hello: &LinkHello,
) -> Result<(LinkAccept, DirectionalKeys), CryptoError> {
    accept_hello_with(bridge, device, hello, super::random_bytes::<16>(), LinkEphemeral::generate())
}

/// [`accept_hello`] with a fixed nonce and ephemeral key (the test vectors).
pub fn accept_hello_with(
    bridge: &Identity,
    device: &PublicIdentity,
    hello: &LinkHello,
    bridge_nonce: [u8; 16],
    ephemeral: LinkEphemeral,
) -> Result<(LinkAccept, DirectionalKeys), CryptoError> {
    let bridge_id = bridge.public().bridge_id();
    let device_id = device.device_id();
    if hello.device_id != device_id {
        return Err(CryptoError::BadSignature("link_hello (it names another device)"));
    }
    let client_nonce = b64url_array::<16>("client_nonce", &hello.client_nonce)?;
    let client_ephemeral = b64url_array::<32>("client_ephemeral", &hello.client_ephemeral)?;
    device.verify(
        &link_hello_bytes(bridge_id.as_str(), device_id.as_str(), &client_nonce, &client_ephemeral),
        &from_b64("sig", &hello.sig)?,
        "link_hello",
    )?;
    let fields = HandshakeFields {
        bridge_id: bridge_id.as_str(),
        device_id: device_id.as_str(),
        client_nonce,
        client_ephemeral,
        bridge_nonce,
        bridge_ephemeral: ephemeral.public_bytes(),
    };
    let dh = DhResults {
        ee: ephemeral.agree(&client_ephemeral, "client_ephemeral")?,
        es: Zeroizing::new(bridge.agree(&PublicKey::from(client_ephemeral), "client_ephemeral")?),
        se: ephemeral.agree(&device.x25519.to_bytes(), "device x25519")?,
        ss: Zeroizing::new(bridge.agree(&device.x25519, "device x25519")?),
    };
    drop(ephemeral);
    let accept = LinkAccept {
        device_id: device_id.clone(),
        bridge_nonce: b64url(&bridge_nonce),
        bridge_ephemeral: b64url(&fields.bridge_ephemeral),
        sig: b64(&bridge.sign(&fields.accept_bytes())),
        conn: None,
    };
    Ok((accept, link_keys(&dh, &fields)))
}

#[cfg(test)]
#[path = "handshake_tests.rs"]
mod tests;
