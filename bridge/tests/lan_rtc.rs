//! The web app's LAN fast path, driven by a Rust WebRTC peer (str0m, the crate the
//! bridge uses) in place of the page: the offer goes to the bridge sealed inside the
//! device's link through a real relay, the answer comes back the same way, the data
//! channel opens over UDP on 127.0.0.1, and a whole echo turn runs over it — the
//! same device protocol as the LAN WebSocket, carried in pieces
//! (`terminull_protocol::rtc::pieces`).
//!
//! The page's side of the channel is played by a small shim: a WebSocket on loopback
//! that the device's ordinary LAN client (`Connection::open_lan`) connects to, whose
//! every frame the shim carries over the data channel and back. So the link, its
//! handshake and its sealing are the real client's, and the test counts the frames
//! the channel carried.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use str0m::change::SdpAnswer;
use str0m::channel::ChannelId;
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc, RtcConfig};
use support::remote::{say, until_turn_end};
use terminull_bridge::daemon_client::Client;
use terminull_client::connection::Connection;
use terminull_client::transcript::Transcript;
use terminull_protocol::control::{ControlMessage, ReplyResult, RtcOffer};
use terminull_protocol::rtc::{DATA_CHANNEL_LABEL, Reassembly, pieces};
use terminull_relay::{Relay, RelayConfig};
use tokio::net::{TcpListener, UdpSocket};
use tokio_tungstenite::tungstenite::Message;

/// The page's peer: full ICE, controlling, one host candidate on loopback.
struct PagePeer {
    rtc: Rtc,
    socket: UdpSocket,
    local: SocketAddr,
    channel: ChannelId,
}

async fn page_peer() -> (PagePeer, String, str0m::change::SdpPendingOffer) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let local = socket.local_addr().unwrap();
    let crypto = Arc::new(str0m::crypto::from_feature_flags());
    let mut rtc = RtcConfig::new().set_crypto_provider(crypto).build(Instant::now());
    rtc.add_local_candidate(Candidate::host(local, "udp").unwrap());
    let mut change = rtc.sdp_api();
    let channel = change.add_channel(DATA_CHANNEL_LABEL.into());
    let (offer, pending) = change.apply().expect("an offer");
    (PagePeer { rtc, socket, local, channel }, offer.to_sdp_string(), pending)
}

/// Frames the data channel carried, each way.
#[derive(Default)]
struct Carried {
    to_bridge: AtomicUsize,
    from_bridge: AtomicUsize,
}

impl PagePeer {
    /// Drives the peer until its channel opens.
    async fn until_open(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut buf = vec![0u8; 2048];
        loop {
            let timeout = loop {
                match self.rtc.poll_output().unwrap() {
                    Output::Timeout(t) => break t,
                    Output::Transmit(t) => {
                        let _ = self.socket.send_to(&t.contents, t.destination).await;
                    }
                    Output::Event(Event::ChannelOpen(id, _)) if id == self.channel => return,
                    Output::Event(_) => {}
                }
            };
            assert!(Instant::now() < deadline, "the data channel did not open");
            self.step(timeout, &mut buf).await;
        }
    }

    async fn step(&mut self, timeout: Instant, buf: &mut [u8]) {
        tokio::select! {
            received = self.socket.recv_from(buf) => {
                let (n, source) = received.unwrap();
                let input = Input::Receive(Instant::now(), Receive {
                    proto: Protocol::Udp,
                    source,
                    destination: self.local,
                    contents: buf[..n].try_into().unwrap(),
                });
                self.rtc.handle_input(input).unwrap();
            }
            () = tokio::time::sleep_until(tokio::time::Instant::from_std(timeout)) => {
                self.rtc.handle_input(Input::Timeout(Instant::now())).unwrap();
            }
        }
    }

    /// Carries one WebSocket client's frames over the channel and back until either
    /// side ends.
    async fn shim(mut self, listener: TcpListener, carried: Arc<Carried>) {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        let mut waiting: std::collections::VecDeque<Vec<u8>> = std::collections::VecDeque::new();
        let mut reassembly = Reassembly::default();
        let mut buf = vec![0u8; 2048];
        loop {
            let timeout = loop {
                match self.rtc.poll_output().unwrap() {
                    Output::Timeout(t) => break t,
                    Output::Transmit(t) => {
                        let _ = self.socket.send_to(&t.contents, t.destination).await;
                    }
                    Output::Event(Event::ChannelData(data)) => {
                        if let Some(frame) = reassembly.push(&data.data, 1 << 20).unwrap() {
                            carried.from_bridge.fetch_add(1, Ordering::Relaxed);
                            if ws.send(Message::text(frame)).await.is_err() {
                                return;
                            }
                        }
                    }
                    Output::Event(Event::ChannelClose(_)) => return,
                    Output::Event(_) => {}
                }
            };
            let mut channel = self.rtc.channel(self.channel).expect("the channel");
            while let Some(piece) = waiting.front() {
                if !channel.write(true, piece).unwrap() {
                    break;
                }
                waiting.pop_front();
            }
            tokio::select! {
                message = ws.next(), if waiting.is_empty() => match message {
                    Some(Ok(Message::Text(text))) => {
                        carried.to_bridge.fetch_add(1, Ordering::Relaxed);
                        waiting.extend(pieces(text.as_bytes()));
                    }
                    Some(Ok(_)) => {}
                    _ => return,
                },
                () = self.step(timeout, &mut buf) => {}
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_channel_offered_through_the_relay_carries_a_whole_echo_turn_on_the_lan() {
    support::remote::logs();
    let relay_data = tempfile::tempdir().unwrap();
    let relay = Relay::start(RelayConfig::new("127.0.0.1:0".parse().unwrap(), relay_data.path()))
        .await
        .expect("the relay starts");
    let bridge = support::remote::paired_bridge().await;
    support::remote::connect_to_relay(&bridge, relay.ws_url());
    let lan = support::remote::start_lan(&bridge).await;
    support::remote::until_registered(&relay, &bridge).await;

    // Signalling: the offer and the answer travel sealed, through the relay.
    let through_relay = Connection::open(&bridge.device, &bridge.record, Some(&relay.ws_url())).await.expect("a link");
    let mut signalling = Client::remote(through_relay);
    let (mut page, offer, pending) = page_peer().await;
    let reply = signalling
        .call(ControlMessage::RtcOffer(RtcOffer { sdp: offer }), &mut Vec::new())
        .await
        .expect("rtc_offer answered");
    let ReplyResult::RtcAnswer { sdp } = reply else { panic!("expected rtc_answer, got {reply:?}") };
    assert!(sdp.contains("typ host") && sdp.contains("127.0.0.1"), "the answer names the LAN address: {sdp}");
    assert!(sdp.contains("a=ice-lite"), "the bridge is ICE-lite: {sdp}");
    page.rtc.sdp_api().accept_answer(pending, SdpAnswer::from_sdp_string(&sdp).unwrap()).unwrap();
    page.until_open().await;
    assert_eq!(bridge.ctx.rtc.peers(), 1);

    // The device's own LAN client, through the shim, over the data channel.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let shim_url = format!("ws://{}", listener.local_addr().unwrap());
    let carried = Arc::new(Carried::default());
    let shim = tokio::spawn(page.shim(listener, carried.clone()));
    let over_channel = Connection::open_lan(&bridge.device, &bridge.record, &shim_url).await.expect("a link");
    let mut client = Client::remote(over_channel);
    let cwd = tempfile::tempdir().unwrap();
    let mut transcript = Transcript::new();
    let session = support::remote::start_echo_session(&mut client, cwd.path(), &mut transcript).await;
    say(&mut client, &session, "hello over the data channel", &mut transcript).await;
    let blocks = until_turn_end(&mut client, &mut transcript).await;
    let texts = support::remote::texts(&transcript);
    assert!(texts.iter().any(|t| t == "You said: hello over the data channel"), "{texts:?}");
    support::remote::assert_complete(&transcript, &support::remote::history(bridge.bridge_home.path(), &session));
    let (to_bridge, from_bridge) =
        (carried.to_bridge.load(Ordering::Relaxed), carried.from_bridge.load(Ordering::Relaxed));
    eprintln!(
        "the data channel carried {to_bridge} frames to the bridge and {from_bridge} back ({blocks} blocks of the turn)"
    );
    assert!(from_bridge >= blocks, "every block of the turn came over the data channel");

    // The link over the channel ends with it; the bridge forgets the peer.
    drop(client);
    shim.abort();
    let deadline = Instant::now() + Duration::from_secs(60);
    while bridge.ctx.rtc.peers() > 0 {
        assert!(Instant::now() < deadline, "the bridge kept the peer after the page went away");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    lan.stop();
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offer_with_a_public_or_relayed_candidate_is_refused_naming_the_line() {
    support::remote::logs();
    let bridge = support::remote::paired_bridge().await;
    let lan = support::remote::start_lan(&bridge).await;
    let mut client =
        Client::remote(Connection::open_lan(&bridge.device, &bridge.record, &lan.ws_url()).await.expect("a LAN link"));
    let offer = |candidate: &str| {
        ControlMessage::RtcOffer(RtcOffer { sdp: format!("v=0\r\ns=-\r\nt=0 0\r\na=candidate:{candidate}\r\n") })
    };
    for (candidate, says) in [
        ("1 1 udp 2122260223 8.8.8.8 50000 typ host", "8.8.8.8 is not a private"),
        ("1 1 udp 1686052607 10.0.0.2 50000 typ srflx raddr 0.0.0.0 rport 0", "only host candidates"),
    ] {
        let refused = client.call(offer(candidate), &mut Vec::new()).await.expect_err("refused");
        assert!(refused.to_string().contains(says), "{refused}");
        assert!(refused.to_string().contains("SDP line 4"), "{refused}");
    }
    let big = ControlMessage::RtcOffer(RtcOffer { sdp: "v".repeat(terminull_protocol::rtc::MAX_SDP_BYTES + 1) });
    let refused = client.call(big, &mut Vec::new()).await.expect_err("refused");
    assert!(refused.to_string().contains("at most 16384"), "{refused}");
    assert_eq!(bridge.ctx.rtc.peers(), 0);
    lan.stop();
}
