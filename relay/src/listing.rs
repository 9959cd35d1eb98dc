//! `GET /v1/bridges/{bridge_id}/devices` is authenticated: the registry names the user's
//! devices, so only the bridge itself or one of its active devices may read it.
//!
//! The caller signs, with its Ed25519 key,
//! `transcript("terminull/v1 devices-listing", bridge_id, signer_id, ts as decimal text)`
//! and passes `?signer=<bridge or device id>&ts=<unix s>&sig=<base64url signature>`.
//! `ts` must be within `subscription_clock_skew` (300 s) of the relay's clock.

use terminull_protocol::crypto::keys::{Identity, PublicIdentity, PublicKeys};
use terminull_protocol::crypto::{b64url, from_b64url, transcript};
use terminull_protocol::relay::DeviceRecord;

/// The bytes a devices-listing request signs.
pub fn devices_listing_bytes(bridge_id: &str, signer_id: &str, ts: u64) -> Vec<u8> {
    transcript(&[
        b"terminull/v1 devices-listing",
        bridge_id.as_bytes(),
        signer_id.as_bytes(),
        ts.to_string().as_bytes(),
    ])
}

/// The query string (without `?`) that authenticates a listing of `bridge_id`'s devices by
/// `signer` (the bridge's identity or a device's) at `ts`.
pub fn devices_listing_query(signer: &Identity, bridge_id: &str, ts: u64) -> String {
    let public = signer.public();
    let bridge = public.bridge_id();
    let signer_id = if bridge.as_str() == bridge_id { bridge.0 } else { public.device_id().0 };
    let sig = signer.sign(&devices_listing_bytes(bridge_id, &signer_id, ts));
    format!("signer={signer_id}&ts={ts}&sig={}", b64url(&sig))
}

/// Why a listing request is refused; `status` is the HTTP status.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ListingRefusal {
    pub(crate) status: u16,
    pub(crate) message: String,
}

fn refuse(status: u16, message: impl Into<String>) -> ListingRefusal {
    ListingRefusal { status, message: message.into() }
}

/// The authentication fields of a request's query string.
#[derive(Debug, Default)]
pub(crate) struct ListingAuth {
    signer: Option<String>,
    ts: Option<String>,
    sig: Option<String>,
}

impl ListingAuth {
    /// Picks `signer`, `ts` and `sig` out of a query string (other parameters ignored).
    pub(crate) fn from_query(query: Option<&str>) -> Self {
        let mut auth = Self::default();
        for pair in query.unwrap_or_default().split('&') {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let slot = match name {
                "signer" => &mut auth.signer,
                "ts" => &mut auth.ts,
                "sig" => &mut auth.sig,
                _ => continue,
            };
            *slot = Some(value.to_owned());
        }
        auth
    }

    /// Refuses (401) a request that lacks any of the three fields.
    pub(crate) fn require_all(&self) -> Result<(), ListingRefusal> {
        match (&self.signer, &self.ts, &self.sig) {
            (Some(_), Some(_), Some(_)) => Ok(()),
            _ => Err(refuse(401, MISSING)),
        }
    }

    /// Checks the request against the bridge's keys and registry at `now`; `skew` is the
    /// accepted clock difference in seconds.
    pub(crate) fn check(
        &self,
        bridge_id: &str,
        bridge_keys: &PublicKeys,
        devices: &[DeviceRecord],
        now: u64,
        skew: u64,
    ) -> Result<(), ListingRefusal> {
        let (Some(signer), Some(ts), Some(sig)) = (&self.signer, &self.ts, &self.sig) else {
            return Err(refuse(401, MISSING));
        };
        let ts: u64 = ts.parse().map_err(|_| refuse(401, "`ts` is not Unix seconds"))?;
        if ts.abs_diff(now) > skew {
            return Err(refuse(
                401,
                format!("`ts` is {} s away from the relay's clock; at most {skew} s is accepted", ts.abs_diff(now)),
            ));
        }
        let key = if signer == bridge_id {
            PublicIdentity::from_wire(bridge_keys).map_err(|e| refuse(500, format!("the stored bridge key: {e}")))?
        } else {
            let record = devices.iter().find(|d| d.device_id.as_str() == signer && !d.revoked).ok_or_else(|| {
                refuse(403, format!("`{signer}` is neither bridge `{bridge_id}` nor one of its active devices"))
            })?;
            PublicIdentity::from_wire(&record.keys).map_err(|e| refuse(403, format!("device `{signer}`: {e}")))?
        };
        let signed = devices_listing_bytes(bridge_id, signer, ts);
        from_b64url("sig", sig)
            .and_then(|sig| key.verify(&signed, &sig, "the devices listing request"))
            .map_err(|e| refuse(401, format!("`sig`: {e} under the key of `{signer}`")))
    }
}

const MISSING: &str = "listing a bridge's devices needs `signer`, `ts` and `sig` query parameters: \
     a signature by the bridge or one of its active devices (docs/relay-operations.md)";

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    #[test]
    fn the_bridge_and_its_active_devices_may_list_and_nobody_else() {
        let bridge = Identity::generate();
        let (phone, old, stranger) = (Identity::generate(), Identity::generate(), Identity::generate());
        let record = |d: &Identity, revoked| DeviceRecord {
            device_id: d.public().device_id(),
            keys: d.public().to_wire(),
            name: "n".into(),
            revoked,
        };
        let devices = [record(&phone, false), record(&old, true)];
        let id = bridge.public().bridge_id();
        let check = |signer: &Identity, ts: u64| {
            ListingAuth::from_query(Some(&devices_listing_query(signer, id.as_str(), ts))).check(
                id.as_str(),
                &bridge.public().to_wire(),
                &devices,
                NOW,
                300,
            )
        };
        assert_eq!(check(&bridge, NOW), Ok(()));
        assert_eq!(check(&phone, NOW - 300), Ok(()));
        assert_eq!(check(&old, NOW).unwrap_err().status, 403, "revoked");
        assert_eq!(check(&stranger, NOW).unwrap_err().status, 403);
        assert_eq!(check(&bridge, NOW + 301).unwrap_err().status, 401);
        let none = ListingAuth::from_query(None).check(id.as_str(), &bridge.public().to_wire(), &devices, NOW, 300);
        assert_eq!(none.unwrap_err().status, 401);
        // A signature for another time does not verify.
        let query = devices_listing_query(&bridge, id.as_str(), NOW).replace(&format!("ts={NOW}"), "ts=1800000001");
        let forged =
            ListingAuth::from_query(Some(&query)).check(id.as_str(), &bridge.public().to_wire(), &devices, NOW, 300);
        assert_eq!(forged.unwrap_err().status, 401);
    }
}
