//! mDNS on loopback, inside a private network namespace (nothing reaches a real
//! interface): a browser finds an advertised bridge, with its port and id intact.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use terminull_client::mdns::{self, MdnsScope};
use terminull_net::mdns::advertise;
use terminull_protocol::ids::BridgeId;
use terminull_protocol::lan::LanAdvert;

#[test]
fn a_device_browsing_finds_the_advertised_bridge_with_its_port_and_id() {
    if !terminull_netns::body_runs_here("a_device_browsing_finds_the_advertised_bridge_with_its_port_and_id") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let wanted = LanAdvert::new(BridgeId("brg_abcdefghijklmnop".into()), 47001);
        let other = LanAdvert::new(BridgeId("brg_qrstuvwxyz234567".into()), 47002);
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let _a = advertise(&wanted, lo, MdnsScope::LoopbackOnly).unwrap();
        let _b = advertise(&other, lo, MdnsScope::LoopbackOnly).unwrap();
        let found =
            mdns::browse(MdnsScope::LoopbackOnly, Duration::from_secs(10), Some(&wanted.bridge_id)).await.unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].advert, wanted);
        assert_eq!(found[0].url().as_deref(), Some("ws://127.0.0.1:47001"));
        let all = mdns::browse(MdnsScope::LoopbackOnly, Duration::from_secs(3), None).await.unwrap();
        let ids: Vec<_> = all.iter().map(|b| b.advert.bridge_id.as_str()).collect();
        assert_eq!(ids, ["brg_abcdefghijklmnop", "brg_qrstuvwxyz234567"], "{all:?}");
    });
}
