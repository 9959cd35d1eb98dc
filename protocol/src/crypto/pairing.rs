//! Pairing a device with a bridge using a one-time secret shown only in the QR code.
//!
//! The link (QR) carries the bridge's id, its public keys, the relay URL and a
//! 32-byte secret. The device proves it holds the secret with an HMAC over a
//! transcript that includes both parties' public keys and its own nonce, and signs
//! the transcript with its new key; the bridge answers with an HMAC and a signature
//! over the whole exchange. A relay that carries the messages but never saw the QR
//! cannot compute either MAC, so it can neither pair a key of its own nor swap the
//! device's keys; the bridge's keys come from the QR, so they cannot be swapped
//! either. Both sides show a six-digit short code derived from the transcript.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::keys::{Identity, PublicIdentity, PublicKeys};
use super::{
    CryptoError, b64url, b64url_array, from_b64url, hkdf_sha256, hmac_sha256, hmac_sha256_verify, sha256, transcript,
};
use crate::ids::{BridgeId, DeviceId};

/// Bytes of the pairing secret (256 bits).
pub const SECRET_LEN: usize = 32;
/// The longest device name accepted, in bytes.
pub const MAX_DEVICE_NAME: usize = 64;
/// The link format version (`v=` in the fragment).
pub const LINK_VERSION: &str = "1";

/// What a pairing QR code holds.
#[derive(Clone, PartialEq, Eq)]
pub struct PairingLink {
    /// The bridge.
    pub bridge_id: BridgeId,
    /// Its public keys.
    pub bridge: PublicKeys,
    /// The relay's WebSocket URL, when the bridge uses one.
    pub relay: Option<String>,
    /// The bridge's LAN server (`ws://host:port`), when it runs one: a hint, like an
    /// mDNS advertisement (the device finds it again by mDNS if it moves).
    pub lan: Option<String>,
    /// The one-time secret.
    pub secret: [u8; SECRET_LEN],
    /// When the offer expires, Unix seconds.
    pub expires_at: u64,
}

impl std::fmt::Debug for PairingLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PairingLink")
            .field("bridge_id", &self.bridge_id)
            .field("relay", &self.relay)
            .field("lan", &self.lan)
            .finish()
    }
}

impl PairingLink {
    /// `<base>/pair#v=1&b=<bridge id>&e=<ed25519>&x=<x25519>&s=<secret>&t=<expiry>[&r=<relay>][&l=<lan>]`.
    /// The secret travels in the fragment, which browsers never send to a server.
    pub fn to_url(&self, base: &str) -> String {
        let mut url = format!(
            "{}/pair#v={LINK_VERSION}&b={}&e={}&x={}&s={}&t={}",
            base.trim_end_matches('/'),
            self.bridge_id,
            self.bridge.ed25519,
            self.bridge.x25519,
            b64url(&self.secret),
            self.expires_at
        );
        if let Some(relay) = &self.relay {
            url.push_str("&r=");
            url.push_str(&percent_encode(relay));
        }
        if let Some(lan) = &self.lan {
            url.push_str("&l=");
            url.push_str(&percent_encode(lan));
        }
        url
    }

    /// Parses a link made by [`to_url`](Self::to_url) (any base); checks that the
    /// bridge id matches its key.
    pub fn parse(url: &str) -> Result<Self, CryptoError> {
        let bad = |m: &str| CryptoError::Pairing(m.to_owned());
        let (_, fragment) = url.split_once('#').ok_or_else(|| bad("the link has no `#` fragment"))?;
        let mut fields = std::collections::HashMap::new();
        for pair in fragment.split('&') {
            let (k, v) = pair.split_once('=').ok_or_else(|| bad("a link field has no `=`"))?;
            fields.insert(k, v);
        }
        let get = |k: &str| fields.get(k).copied().ok_or_else(|| bad(&format!("the link has no `{k}` field")));
        if get("v")? != LINK_VERSION {
            return Err(bad(&format!(
                "link version `{}` is not supported (this build reads {LINK_VERSION})",
                get("v")?
            )));
        }
        let bridge = PublicKeys { ed25519: get("e")?.to_owned(), x25519: get("x")?.to_owned() };
        let public = PublicIdentity::from_wire(&bridge)?;
        let bridge_id = BridgeId(get("b")?.to_owned());
        if public.bridge_id() != bridge_id {
            return Err(bad("the bridge id does not match the bridge's key"));
        }
        Ok(Self {
            bridge_id,
            bridge,
            relay: fields.get("r").map(|r| percent_decode(r)).transpose()?,
            lan: fields.get("l").map(|l| percent_decode(l)).transpose()?,
            secret: b64url_array("s", get("s")?)?,
            expires_at: get("t")?.parse().map_err(|_| bad("`t` is not a Unix time"))?,
        })
    }

    /// The public handle of this offer (see [`pairing_id`]).
    pub fn pairing_id(&self) -> String {
        pairing_id(&self.secret)
    }
}

/// The offer's public handle: base64url(SHA-256(transcript("terminull/v1 pairing-id",
/// secret))[..16]). It names the offer without revealing the secret.
pub fn pairing_id(secret: &[u8; SECRET_LEN]) -> String {
    b64url(&sha256(&transcript(&[b"terminull/v1 pairing-id", secret]))[..16])
}

fn mac_key(secret: &[u8; SECRET_LEN]) -> [u8; 32] {
    hkdf_sha256(b"terminull/v1 pairing", secret, b"mac")
}

/// device → bridge: pair me.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PairRequest {
    /// The offer's public handle.
    pub pairing_id: String,
    /// The bridge asked.
    pub bridge_id: BridgeId,
    /// The device's id (derived from its key).
    pub device_id: DeviceId,
    /// The device's public keys.
    pub device: PublicKeys,
    /// A name for people ("Pixel 9", "laptop"), at most 64 bytes.
    pub device_name: String,
    /// 16 fresh random bytes, base64url.
    pub device_nonce: String,
    /// HMAC-SHA256 of the request transcript under the pairing key, base64url.
    pub mac: String,
    /// The device's Ed25519 signature over the request transcript, base64url.
    pub sig: String,
}

/// bridge → device: paired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PairResponse {
    /// The bridge.
    pub bridge_id: BridgeId,
    /// The device paired.
    pub device_id: DeviceId,
    /// 16 fresh random bytes, base64url.
    pub bridge_nonce: String,
    /// HMAC-SHA256 of the response transcript under the pairing key, base64url.
    pub mac: String,
    /// The bridge's Ed25519 signature over the response transcript, base64url.
    pub sig: String,
}

fn request_transcript(
    link_bridge_id: &str,
    pairing_id: &str,
    bridge: &PublicIdentity,
    r: &PairRequest,
    device: &PublicIdentity,
    nonce: &[u8],
) -> Vec<u8> {
    transcript(&[
        b"terminull/v1 pair-request",
        link_bridge_id.as_bytes(),
        pairing_id.as_bytes(),
        bridge.ed25519.as_bytes(),
        bridge.x25519.as_bytes(),
        r.device_id.as_str().as_bytes(),
        device.ed25519.as_bytes(),
        device.x25519.as_bytes(),
        r.device_name.as_bytes(),
        nonce,
    ])
}

fn response_transcript(request: &[u8], request_mac: &[u8], bridge_nonce: &[u8]) -> Vec<u8> {
    transcript(&[b"terminull/v1 pair-response", request, request_mac, bridge_nonce])
}

/// Six digits from SHA-256(transcript("terminull/v1 short-code", response transcript)):
/// the first four bytes as a big-endian u32, modulo 1 000 000, shown as `123 456`.
pub fn short_code(response_transcript: &[u8]) -> String {
    let digest = sha256(&transcript(&[b"terminull/v1 short-code", response_transcript]));
    let n = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) % 1_000_000;
    format!("{:03} {:03}", n / 1000, n % 1000)
}

/// A request sent, waiting for the bridge's answer.
pub struct PendingPairing {
    link: PairingLink,
    request_transcript: Vec<u8>,
    request_mac: Vec<u8>,
    device_id: DeviceId,
}

impl std::fmt::Debug for PendingPairing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingPairing").field("bridge_id", &self.link.bridge_id).finish()
    }
}

/// The device's side, step 1: the request for `link`.
pub fn request(
    link: &PairingLink,
    device: &Identity,
    name: &str,
) -> Result<(PairRequest, PendingPairing), CryptoError> {
    request_with_nonce(link, device, name, super::random_bytes::<16>())
}

/// [`request`] with a given nonce (the committed test vectors use fixed ones).
pub fn request_with_nonce(
    link: &PairingLink,
    device: &Identity,
    name: &str,
    nonce: [u8; 16],
) -> Result<(PairRequest, PendingPairing), CryptoError> {
    if name.len() > MAX_DEVICE_NAME {
        return Err(CryptoError::Pairing(format!("the device name is longer than {MAX_DEVICE_NAME} bytes")));
    }
    let bridge = PublicIdentity::from_wire(&link.bridge)?;
    let public = device.public();
    let pairing_id = link.pairing_id();
    let mut req = PairRequest {
        pairing_id: pairing_id.clone(),
        bridge_id: link.bridge_id.clone(),
        device_id: public.device_id(),
        device: public.to_wire(),
        device_name: name.to_owned(),
        device_nonce: b64url(&nonce),
        mac: String::new(),
        sig: String::new(),
    };
    let t = request_transcript(link.bridge_id.as_str(), &pairing_id, &bridge, &req, &public, &nonce);
    let mac = hmac_sha256(&mac_key(&link.secret), &t);
    req.mac = b64url(&mac);
    req.sig = b64url(&device.sign(&t));
    let pending = PendingPairing {
        link: link.clone(),
        request_transcript: t,
        request_mac: mac.to_vec(),
        device_id: req.device_id.clone(),
    };
    Ok((req, pending))
}

/// What the device learns when pairing succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairedBridge {
    /// The bridge.
    pub bridge_id: BridgeId,
    /// Its keys (from the QR, now confirmed).
    pub keys: PublicKeys,
    /// The relay URL from the link.
    pub relay: Option<String>,
    /// The LAN server URL from the link.
    pub lan: Option<String>,
    /// The short code both sides show.
    pub short_code: String,
}

impl PendingPairing {
    /// The device's side, step 2: checks the bridge's answer.
    pub fn finish(self, response: &PairResponse) -> Result<PairedBridge, CryptoError> {
        if response.bridge_id != self.link.bridge_id || response.device_id != self.device_id {
            return Err(CryptoError::Pairing("the answer is for another bridge or device".into()));
        }
        let nonce = b64url_array::<16>("bridge_nonce", &response.bridge_nonce)?;
        let t = response_transcript(&self.request_transcript, &self.request_mac, &nonce);
        hmac_sha256_verify(
            &mac_key(&self.link.secret),
            &t,
            &from_b64url("mac", &response.mac)?,
            "the pairing response",
        )?;
        let bridge = PublicIdentity::from_wire(&self.link.bridge)?;
        bridge.verify(&t, &from_b64url("sig", &response.sig)?, "the pairing response")?;
        Ok(PairedBridge {
            bridge_id: self.link.bridge_id.clone(),
            keys: self.link.bridge.clone(),
            relay: self.link.relay.clone(),
            lan: self.link.lan.clone(),
            short_code: short_code(&t),
        })
    }
}

/// What the bridge learns when it accepts a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedDevice {
    /// The answer to send.
    pub response: PairResponse,
    /// The device's id.
    pub device_id: DeviceId,
    /// Its keys.
    pub keys: PublicKeys,
    /// Its name.
    pub name: String,
    /// The short code both sides show.
    pub short_code: String,
}

/// The bridge's side: checks a request against the offer's secret and answers it.
/// Expiry and one-time use are the caller's policy (it holds the offer).
pub fn accept(bridge: &Identity, secret: &[u8; SECRET_LEN], req: &PairRequest) -> Result<AcceptedDevice, CryptoError> {
    accept_with_nonce(bridge, secret, req, super::random_bytes::<16>())
}

/// [`accept`] with a given nonce (the committed test vectors use fixed ones).
pub fn accept_with_nonce(
    bridge: &Identity,
    secret: &[u8; SECRET_LEN],
    req: &PairRequest,
    bridge_nonce: [u8; 16],
) -> Result<AcceptedDevice, CryptoError> {
    let public = bridge.public();
    if req.bridge_id != public.bridge_id() {
        return Err(CryptoError::Pairing(format!("the request is for bridge `{}`", req.bridge_id)));
    }
    if req.pairing_id != pairing_id(secret) {
        return Err(CryptoError::Pairing("the request names another pairing offer".into()));
    }
    if req.device_name.len() > MAX_DEVICE_NAME {
        return Err(CryptoError::Pairing(format!("the device name is longer than {MAX_DEVICE_NAME} bytes")));
    }
    let device = PublicIdentity::from_wire(&req.device)?;
    if device.device_id() != req.device_id {
        return Err(CryptoError::Pairing("the device id does not match the device's key".into()));
    }
    let nonce = b64url_array::<16>("device_nonce", &req.device_nonce)?;
    let t = request_transcript(req.bridge_id.as_str(), &req.pairing_id, &public, req, &device, &nonce);
    let mac = from_b64url("mac", &req.mac)?;
    hmac_sha256_verify(&mac_key(secret), &t, &mac, "the pairing request")?;
    device.verify(&t, &from_b64url("sig", &req.sig)?, "the pairing request")?;
    let rt = response_transcript(&t, &mac, &bridge_nonce);
    let response = PairResponse {
        bridge_id: req.bridge_id.clone(),
        device_id: req.device_id.clone(),
        bridge_nonce: b64url(&bridge_nonce),
        mac: b64url(&hmac_sha256(&mac_key(secret), &rt)),
        sig: b64url(&bridge.sign(&rt)),
    };
    Ok(AcceptedDevice {
        response,
        device_id: req.device_id.clone(),
        keys: req.device.clone(),
        name: req.device_name.clone(),
        short_code: short_code(&rt),
    })
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &str) -> Result<String, CryptoError> {
    let bad = || CryptoError::Pairing("`r` is not percent-encoded UTF-8".into());
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(bridge: &Identity) -> PairingLink {
        PairingLink {
            bridge_id: bridge.public().bridge_id(),
            bridge: bridge.public().to_wire(),
            relay: Some("ws://127.0.0.1:7000/v1?x=1&y".into()),
            lan: Some("ws://192.168.1.20:8478".into()),
            secret: [42; 32],
            expires_at: 1_900_000_000,
        }
    }

    #[test]
    fn a_device_with_the_secret_pairs_and_both_sides_show_the_same_code() {
        let bridge = Identity::generate();
        let device = Identity::generate();
        let link = PairingLink::parse(&link(&bridge).to_url("https://relay.example")).unwrap();
        assert_eq!(link.relay.as_deref(), Some("ws://127.0.0.1:7000/v1?x=1&y"));
        assert_eq!(link.lan.as_deref(), Some("ws://192.168.1.20:8478"));
        let (req, pending) = request(&link, &device, "phone").unwrap();
        let accepted = accept(&bridge, &link.secret, &req).unwrap();
        let paired = pending.finish(&accepted.response).unwrap();
        assert_eq!(paired.short_code, accepted.short_code);
        assert_eq!(accepted.device_id, device.public().device_id());
        assert_eq!(paired.short_code.len(), 7);
    }

    #[test]
    fn without_the_secret_a_relay_cannot_pair_its_own_key() {
        let bridge = Identity::generate();
        let mut guessed = link(&bridge);
        guessed.secret = [0; 32];
        let (mut req, _) = request(&guessed, &Identity::generate(), "relay").unwrap();
        req.pairing_id = pairing_id(&[42; 32]);
        assert!(matches!(accept(&bridge, &[42; 32], &req), Err(CryptoError::BadMac(_))));
    }

    #[test]
    fn swapping_the_device_keys_in_transit_is_detected() {
        let bridge = Identity::generate();
        let (mut req, _) = request(&link(&bridge), &Identity::generate(), "phone").unwrap();
        let attacker = Identity::generate().public();
        req.device = attacker.to_wire();
        req.device_id = attacker.device_id();
        assert!(matches!(accept(&bridge, &[42; 32], &req), Err(CryptoError::BadMac(_))));
    }

    #[test]
    fn a_forged_answer_is_refused_by_the_device() {
        let bridge = Identity::generate();
        let (req, pending) = request(&link(&bridge), &Identity::generate(), "phone").unwrap();
        let mut answer = accept(&bridge, &[42; 32], &req).unwrap().response;
        answer.bridge_nonce = b64url(&[9; 16]);
        assert!(pending.finish(&answer).is_err());
    }

    #[test]
    fn a_link_whose_id_does_not_match_its_key_is_refused() {
        let bridge = Identity::generate();
        let mut l = link(&bridge);
        l.bridge_id = BridgeId("brg_aaaaaaaaaaaaaaaa".into());
        assert!(PairingLink::parse(&l.to_url("x")).is_err());
        assert!(PairingLink::parse("https://x/pair").is_err());
    }
}
