//! RFC 8291 message encryption over the RFC 8188 `aes128gcm` content coding.
//!
//! One record, record size [`RECORD_SIZE`], the padding delimiter `0x02` and no padding. The
//! body is `salt (16) || rs (4, big-endian) || idlen (1) = 65 || as_public (65) || ciphertext`.

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes128Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD_INDIFFERENT;
use hkdf::Hkdf;
use p256::elliptic_curve::Generate;
use p256::elliptic_curve::sec1::ToSec1Point;
use p256::{PublicKey, SecretKey};
use rand::RngExt;
use sha2::Sha256;
use std::fmt;

/// The record size written into every body this module produces (RFC 8291 §4: push services
/// need only accept bodies of 4096 octets, so one record of this size always fits).
pub const RECORD_SIZE: u32 = 4096;

/// The largest plaintext [`encrypt`] accepts: 4096 minus the 86-octet header, the 16-octet
/// authentication tag and the 1-octet padding delimiter (RFC 8291 §4).
pub const MAX_PLAINTEXT_LEN: usize = 3993;

/// Length of the `aes128gcm` header this module writes: salt, record size, key id length and
/// the 65-octet application server public key.
const HEADER_LEN: usize = SALT_LEN + 4 + 1 + POINT_LEN;
const SALT_LEN: usize = 16;
const AUTH_LEN: usize = 16;
const POINT_LEN: usize = 65;
const TAG_LEN: usize = 16;
/// RFC 8188 §2: a record size below 18 cannot hold one octet of plaintext.
const MIN_RECORD_SIZE: u32 = 18;

/// What went wrong decoding a key, encrypting or decrypting a push message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// A key field was not base64url.
    #[error("{field} is not base64url")]
    Base64 {
        /// Which field: `p256dh`, `auth` or `VAPID private key`.
        field: &'static str,
    },
    /// A key field decoded to the wrong length or to no valid P-256 key.
    #[error("{field} is not a valid key: {reason}")]
    InvalidKey {
        /// Which field: `p256dh`, `auth`, `VAPID private key` or `keyid`.
        field: &'static str,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The plaintext does not fit in one record of a 4096-octet push message.
    #[error("plaintext is {len} bytes; a push message carries at most {max}")]
    PlaintextTooLarge {
        /// The plaintext length offered.
        len: usize,
        /// [`MAX_PLAINTEXT_LEN`].
        max: usize,
    },
    /// An `aes128gcm` body that does not parse (decryption side).
    #[error("malformed aes128gcm body: {0}")]
    Malformed(&'static str),
    /// The record did not authenticate: wrong keys, or the body was altered.
    #[error("the aes128gcm record does not authenticate")]
    Decryption,
    /// The AEAD refused to encrypt (does not happen for records within the size bound).
    #[error("AES-GCM encryption failed")]
    Encryption,
}

/// A user agent's decoded subscription keys: its ECDH public key (`p256dh`) and the 16-octet
/// authentication secret (`auth`).
#[derive(Clone)]
pub struct SubscriptionKeys {
    p256dh: PublicKey,
    auth: [u8; AUTH_LEN],
}

impl SubscriptionKeys {
    /// Keys from their decoded parts.
    pub fn new(p256dh: PublicKey, auth: [u8; AUTH_LEN]) -> Self {
        Self { p256dh, auth }
    }

    /// Decodes the base64url strings a browser hands out in `PushSubscription.toJSON().keys`:
    /// `p256dh` an uncompressed P-256 point (65 octets), `auth` 16 octets. Padding is tolerated.
    pub fn from_base64url(p256dh: &str, auth: &str) -> Result<Self, CryptoError> {
        let point = decode_b64("p256dh", p256dh, POINT_LEN)?;
        if point.len() != POINT_LEN || point.first() != Some(&0x04) {
            return Err(CryptoError::InvalidKey {
                field: "p256dh",
                reason: "not an uncompressed 65-octet P-256 point",
            });
        }
        let p256dh = PublicKey::from_sec1_bytes(&point)
            .map_err(|_| CryptoError::InvalidKey { field: "p256dh", reason: "not a point on P-256" })?;
        let auth = decode_b64("auth", auth, AUTH_LEN)?;
        let auth: [u8; AUTH_LEN] = auth
            .as_slice()
            .try_into()
            .map_err(|_| CryptoError::InvalidKey { field: "auth", reason: "not 16 octets" })?;
        Ok(Self { p256dh, auth })
    }

    /// The user agent's ECDH public key.
    pub fn p256dh(&self) -> &PublicKey {
        &self.p256dh
    }

    /// The uncompressed 65-octet encoding of the user agent's public key.
    pub fn p256dh_bytes(&self) -> [u8; POINT_LEN] {
        uncompressed(&self.p256dh)
    }
}

impl fmt::Debug for SubscriptionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubscriptionKeys")
            .field("p256dh", &b64(&self.p256dh_bytes()))
            .field("auth", &"<redacted>")
            .finish()
    }
}

/// Encrypts `plaintext` for the user agent holding `keys` (RFC 8291 §3.4), with the given
/// ephemeral application server key and salt. Deterministic: the same inputs give the same
/// body, which is what the RFC's test vector checks. Use [`seal`] to send; a key or salt that
/// is ever reused breaks the encryption.
pub fn encrypt(
    keys: &SubscriptionKeys,
    plaintext: &[u8],
    as_private: &SecretKey,
    salt: &[u8; SALT_LEN],
) -> Result<Vec<u8>, CryptoError> {
    if plaintext.len() > MAX_PLAINTEXT_LEN {
        return Err(CryptoError::PlaintextTooLarge { len: plaintext.len(), max: MAX_PLAINTEXT_LEN });
    }
    let as_public = uncompressed(&as_private.public_key());
    let ua_public = keys.p256dh_bytes();
    let shared = as_private.diffie_hellman(&keys.p256dh);
    let (cek, nonce) = derive(shared.raw_secret_bytes().as_slice(), &keys.auth, &ua_public, &as_public, salt)?;

    let mut record = Vec::with_capacity(plaintext.len() + 1);
    record.extend_from_slice(plaintext);
    record.push(0x02);
    let cipher = Aes128Gcm::new_from_slice(&cek).map_err(|_| CryptoError::Encryption)?;
    let nonce = Nonce::try_from(&nonce[..]).map_err(|_| CryptoError::Encryption)?;
    let ciphertext = cipher.encrypt(&nonce, record.as_slice()).map_err(|_| CryptoError::Encryption)?;

    let mut body = Vec::with_capacity(HEADER_LEN + ciphertext.len());
    body.extend_from_slice(salt);
    body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    body.push(POINT_LEN as u8);
    body.extend_from_slice(&as_public);
    body.extend_from_slice(&ciphertext);
    Ok(body)
}

/// [`encrypt`] with a fresh random ephemeral key and salt: what a sender uses.
pub fn seal(keys: &SubscriptionKeys, plaintext: &[u8]) -> Result<Vec<u8>, CryptoError> {
    let mut rng = rand::rng();
    let as_private = SecretKey::generate_from_rng(&mut rng);
    let salt: [u8; SALT_LEN] = rng.random();
    encrypt(keys, plaintext, &as_private, &salt)
}

/// Decrypts an `aes128gcm` push message body with the user agent's private key and
/// authentication secret: the receiving side of [`encrypt`]. Only single-record bodies (all
/// RFC 8291 allows) are accepted; the padding is removed.
pub fn decrypt(ua_private: &SecretKey, auth_secret: &[u8; AUTH_LEN], body: &[u8]) -> Result<Vec<u8>, CryptoError> {
    let (salt, rest) = body.split_first_chunk::<SALT_LEN>().ok_or(CryptoError::Malformed("shorter than its header"))?;
    let (rs, rest) = rest.split_first_chunk::<4>().ok_or(CryptoError::Malformed("shorter than its header"))?;
    let (idlen, rest) = rest.split_first().ok_or(CryptoError::Malformed("shorter than its header"))?;
    let rs = u32::from_be_bytes(*rs);
    if rs < MIN_RECORD_SIZE {
        return Err(CryptoError::Malformed("record size below 18"));
    }
    let idlen = usize::from(*idlen);
    if idlen != POINT_LEN {
        return Err(CryptoError::Malformed("keyid is not a 65-octet P-256 public key"));
    }
    let (keyid, ciphertext) =
        rest.split_first_chunk::<POINT_LEN>().ok_or(CryptoError::Malformed("shorter than its header"))?;
    if keyid[0] != 0x04 {
        return Err(CryptoError::InvalidKey { field: "keyid", reason: "not an uncompressed P-256 point" });
    }
    let as_key = PublicKey::from_sec1_bytes(keyid)
        .map_err(|_| CryptoError::InvalidKey { field: "keyid", reason: "not a point on P-256" })?;
    if ciphertext.len() < TAG_LEN + 1 {
        return Err(CryptoError::Malformed("record shorter than its tag and delimiter"));
    }
    if u32::try_from(ciphertext.len()).map_or(true, |len| len > rs) {
        return Err(CryptoError::Malformed("more than one record"));
    }

    let ua_public = uncompressed(&ua_private.public_key());
    let shared = ua_private.diffie_hellman(&as_key);
    let (cek, nonce) = derive(shared.raw_secret_bytes().as_slice(), auth_secret, &ua_public, keyid, salt)?;
    let cipher = Aes128Gcm::new_from_slice(&cek).map_err(|_| CryptoError::Decryption)?;
    let nonce = Nonce::try_from(&nonce[..]).map_err(|_| CryptoError::Decryption)?;
    let mut record = cipher.decrypt(&nonce, ciphertext).map_err(|_| CryptoError::Decryption)?;

    // RFC 8188 §2: the plaintext is followed by the delimiter and then any number of zeros.
    let end = record.iter().rposition(|&b| b != 0).ok_or(CryptoError::Malformed("record has no delimiter"))?;
    match record.get(end) {
        Some(0x02) => {}
        Some(0x01) => return Err(CryptoError::Malformed("record is not marked as the last one")),
        _ => return Err(CryptoError::Malformed("record has no delimiter")),
    }
    record.truncate(end);
    Ok(record)
}

/// RFC 8291 §3.3-3.4 and RFC 8188 §2.2-2.3: the content encryption key and the nonce.
fn derive(
    ecdh_secret: &[u8],
    auth: &[u8; AUTH_LEN],
    ua_public: &[u8; POINT_LEN],
    as_public: &[u8; POINT_LEN],
    salt: &[u8; SALT_LEN],
) -> Result<([u8; 16], [u8; 12]), CryptoError> {
    const KEY_INFO: &[u8] = b"WebPush: info\0";
    let mut key_info = [0u8; KEY_INFO.len() + 2 * POINT_LEN];
    key_info[..KEY_INFO.len()].copy_from_slice(KEY_INFO);
    key_info[KEY_INFO.len()..KEY_INFO.len() + POINT_LEN].copy_from_slice(ua_public);
    key_info[KEY_INFO.len() + POINT_LEN..].copy_from_slice(as_public);

    let mut ikm = [0u8; 32];
    Hkdf::<Sha256>::new(Some(auth), ecdh_secret).expand(&key_info, &mut ikm).map_err(|_| CryptoError::Encryption)?;
    let content = Hkdf::<Sha256>::new(Some(salt), &ikm);
    let mut cek = [0u8; 16];
    content.expand(b"Content-Encoding: aes128gcm\0", &mut cek).map_err(|_| CryptoError::Encryption)?;
    let mut nonce = [0u8; 12];
    content.expand(b"Content-Encoding: nonce\0", &mut nonce).map_err(|_| CryptoError::Encryption)?;
    Ok((cek, nonce))
}

/// The uncompressed SEC1 encoding of a P-256 public key.
pub(crate) fn uncompressed(key: &PublicKey) -> [u8; POINT_LEN] {
    let point = key.to_sec1_point(false);
    let mut out = [0u8; POINT_LEN];
    // An uncompressed non-identity P-256 point is always exactly 65 octets.
    for (slot, byte) in out.iter_mut().zip(point.as_bytes()) {
        *slot = *byte;
    }
    out
}

/// Decodes base64url (padding tolerated), refusing input longer than `max` decoded octets
/// before decoding it.
pub(crate) fn decode_b64(field: &'static str, text: &str, max: usize) -> Result<Vec<u8>, CryptoError> {
    // 4 characters carry 3 octets; allow for padding.
    if text.len() > max.div_ceil(3) * 4 {
        return Err(CryptoError::InvalidKey { field, reason: "too long" });
    }
    URL_SAFE_NO_PAD_INDIFFERENT.decode(text.trim()).map_err(|_| CryptoError::Base64 { field })
}

/// base64url without padding.
pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 8291 Appendix A, base64url as published (line breaks removed).
    const PLAINTEXT: &[u8] = b"When I grow up, I want to be a watermelon";
    const PLAINTEXT_B64: &str = "V2hlbiBJIGdyb3cgdXAsIEkgd2FudCB0byBiZSBhIHdhdGVybWVsb24";
    const AS_PRIVATE: &str = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw";
    const AS_PUBLIC: &str = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8";
    const UA_PRIVATE: &str = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94";
    const UA_PUBLIC: &str = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
    const SALT: &str = "DGv6ra1nlYgDCS1FRnbzlw";
    const AUTH: &str = "BTBZMqHH6r4Tts7J_aSIgg";
    const ECDH_SECRET: &str = "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs";
    const IKM: &str = "S4lYMb_L0FxCeq0WhDx813KgSYqU26kOyzWUdsXYyrg";
    const CEK: &str = "oIhVW04MRdy2XN9CiKLxTg";
    const NONCE: &str = "4h_95klXJ5E_qnoN";
    const HEADER: &str = concat!(
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27ml",
        "mlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8",
    );
    const CIPHERTEXT: &str = "8pfeW0KbunFT06SuDKoJH9Ql87S1QUrdirN6GcG7sFz1y1sqLgVi1VhjVkHsUoEsbI_0LpXMuGvnzQ";
    const BODY: &str = concat!(
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27ml",
        "mlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPT",
        "pK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN",
    );

    fn d(s: &str) -> Vec<u8> {
        URL_SAFE_NO_PAD_INDIFFERENT.decode(s).unwrap()
    }

    fn secret(s: &str) -> SecretKey {
        SecretKey::from_slice(&d(s)).unwrap()
    }

    fn rfc_keys() -> SubscriptionKeys {
        SubscriptionKeys::from_base64url(UA_PUBLIC, AUTH).unwrap()
    }

    #[test]
    fn rfc8291_vector_is_self_consistent() {
        assert_eq!(d(PLAINTEXT_B64), PLAINTEXT);
        assert_eq!(b64(&uncompressed(&secret(AS_PRIVATE).public_key())), AS_PUBLIC);
        assert_eq!(b64(&uncompressed(&secret(UA_PRIVATE).public_key())), UA_PUBLIC);
        // The published body is the published header followed by the published ciphertext.
        let mut joined = d(HEADER);
        joined.extend(d(CIPHERTEXT));
        assert_eq!(joined, d(BODY));
        assert_eq!(d(BODY).len(), 86 + PLAINTEXT.len() + 1 + 16);
    }

    #[test]
    fn rfc8291_intermediate_values() {
        let as_private = secret(AS_PRIVATE);
        let keys = rfc_keys();
        let shared = as_private.diffie_hellman(keys.p256dh());
        assert_eq!(b64(shared.raw_secret_bytes().as_slice()), ECDH_SECRET);

        let ua_public: [u8; 65] = d(UA_PUBLIC).try_into().unwrap();
        let as_public: [u8; 65] = d(AS_PUBLIC).try_into().unwrap();
        let auth: [u8; 16] = d(AUTH).try_into().unwrap();
        let salt: [u8; 16] = d(SALT).try_into().unwrap();
        let mut key_info = b"WebPush: info\0".to_vec();
        key_info.extend_from_slice(&ua_public);
        key_info.extend_from_slice(&as_public);
        let mut ikm = [0u8; 32];
        Hkdf::<Sha256>::new(Some(&auth), shared.raw_secret_bytes().as_slice()).expand(&key_info, &mut ikm).unwrap();
        assert_eq!(b64(&ikm), IKM);

        let (cek, nonce) = derive(shared.raw_secret_bytes().as_slice(), &auth, &ua_public, &as_public, &salt).unwrap();
        assert_eq!(b64(&cek), CEK);
        assert_eq!(b64(&nonce), NONCE);
    }

    #[test]
    fn rfc8291_appendix_a_encrypts_byte_for_byte() {
        let salt: [u8; 16] = d(SALT).try_into().unwrap();
        let body = encrypt(&rfc_keys(), PLAINTEXT, &secret(AS_PRIVATE), &salt).unwrap();
        assert_eq!(body, d(BODY));
        assert_eq!(b64(&body), BODY);
    }

    #[test]
    fn rfc8291_appendix_a_decrypts() {
        let auth: [u8; 16] = d(AUTH).try_into().unwrap();
        assert_eq!(decrypt(&secret(UA_PRIVATE), &auth, &d(BODY)).unwrap(), PLAINTEXT);
    }

    #[test]
    fn seal_round_trips_and_is_fresh_each_time() {
        let ua = SecretKey::generate_from_rng(&mut rand::rng());
        let auth: [u8; 16] = rand::rng().random();
        let keys = SubscriptionKeys::new(ua.public_key(), auth);
        let message = vec![0x5a; MAX_PLAINTEXT_LEN];
        let a = seal(&keys, &message).unwrap();
        let b = seal(&keys, &message).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), RECORD_SIZE as usize, "a maximal plaintext fills exactly a 4096-octet body");
        assert_eq!(decrypt(&ua, &auth, &a).unwrap(), message);
        assert_eq!(decrypt(&ua, &auth, &seal(&keys, b"").unwrap()).unwrap(), b"");
    }

    #[test]
    fn oversize_plaintext_is_refused() {
        let err = seal(&rfc_keys(), &[0u8; MAX_PLAINTEXT_LEN + 1]).unwrap_err();
        assert_eq!(err, CryptoError::PlaintextTooLarge { len: MAX_PLAINTEXT_LEN + 1, max: MAX_PLAINTEXT_LEN });
    }

    #[test]
    fn tampered_or_truncated_bodies_are_refused() {
        let auth: [u8; 16] = d(AUTH).try_into().unwrap();
        let ua = secret(UA_PRIVATE);
        let body = d(BODY);
        let mut flipped = body.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(decrypt(&ua, &auth, &flipped), Err(CryptoError::Decryption));
        let mut wrong_auth = auth;
        wrong_auth[0] ^= 1;
        assert_eq!(decrypt(&ua, &wrong_auth, &body), Err(CryptoError::Decryption));
        for len in [0, 10, 20, 21, 50, 86, 100] {
            assert!(matches!(decrypt(&ua, &auth, &body[..len]), Err(CryptoError::Malformed(_))), "length {len}");
        }
        let mut small_rs = body.clone();
        small_rs[16..20].copy_from_slice(&20u32.to_be_bytes());
        assert_eq!(decrypt(&ua, &auth, &small_rs), Err(CryptoError::Malformed("more than one record")));
    }

    #[test]
    fn subscription_keys_are_validated() {
        assert!(matches!(SubscriptionKeys::from_base64url("!!!", AUTH), Err(CryptoError::Base64 { field: "p256dh" })));
        assert!(matches!(
            SubscriptionKeys::from_base64url(&UA_PUBLIC[..40], AUTH),
            Err(CryptoError::InvalidKey { field: "p256dh", .. })
        ));
        assert!(matches!(
            SubscriptionKeys::from_base64url(UA_PUBLIC, "AAAA"),
            Err(CryptoError::InvalidKey { field: "auth", .. })
        ));
        let long = "A".repeat(10_000);
        assert!(matches!(
            SubscriptionKeys::from_base64url(&long, AUTH),
            Err(CryptoError::InvalidKey { field: "p256dh", reason: "too long" })
        ));
        // A point not on the curve.
        let mut off_curve = d(UA_PUBLIC);
        off_curve[64] ^= 1;
        assert!(matches!(
            SubscriptionKeys::from_base64url(&b64(&off_curve), AUTH),
            Err(CryptoError::InvalidKey { field: "p256dh", .. })
        ));
        // Padded base64url, as some browsers emit, is accepted.
        assert!(SubscriptionKeys::from_base64url(&format!("{UA_PUBLIC}="), &format!("{AUTH}==")).is_ok());
        assert!(!format!("{:?}", rfc_keys()).contains(AUTH));
    }
}
