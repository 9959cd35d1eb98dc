//! The relay as a cluster (issue 25): three `terminull-relay` processes on one Postgres
//! and one NATS (each test starts its own, on loopback), a real bridge (the echo
//! adapter) reaching them through a tiny TCP round-robin proxy (what a load balancer
//! would be), and paired devices on other nodes. A node is killed with SIGKILL mid-turn:
//! the bridge reconnects through the proxy to another node, the device resumes by seq,
//! every block arrives exactly once and the turn completes.

mod support;

#[path = "../../relay/tests/support/servers.rs"]
#[allow(dead_code)]
mod servers;

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use servers::{Nats, Postgres};
use terminull_bridge::daemon_client::Client;
use terminull_client::connection::Connection;
use terminull_client::home::DeviceHome;
use terminull_client::transcript::{Applied, Transcript};
use terminull_protocol::blocks::BlockKind;
use terminull_protocol::control::{self, BridgeMessage, ControlMessage};
use tokio::net::{TcpListener, TcpStream};

/// A `terminull-relay` process, killed when dropped.
struct Node {
    child: Child,
    url: String,
}

impl Node {
    /// Starts a relay node on a free loopback port, on `store` and `bus`.
    fn start(store: &str, bus: &str) -> Self {
        let data = tempfile::tempdir().unwrap();
        let mut child = Command::new(support::relay_bin())
            .args(["--listen", "127.0.0.1:0", "--data", data.path().to_str().unwrap()])
            .args(["--store", store, "--bus", bus, "--store-timeout-secs", "2", "--ping-interval-secs", "2"])
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("terminull-relay starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line.trim().strip_prefix("terminull-relay listening on ").expect("the listening line").to_owned();
        Self { child, url }
    }

    fn addr(&self) -> SocketAddr {
        self.url.strip_prefix("ws://").unwrap().parse().unwrap()
    }

    /// SIGKILL: no goodbye to anyone.
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP round-robin proxy, what a plain load balancer in front of the nodes is: each
/// connection goes to the next backend that accepts a connection (one that refuses is
/// skipped), bytes copied both ways, nothing parsed. Returns its `ws://` URL.
async fn round_robin(backends: Vec<SocketAddr>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let next = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let (backends, next) = (backends.clone(), Arc::clone(&next));
            tokio::spawn(async move {
                for _ in 0..backends.len() {
                    let backend = backends[next.fetch_add(1, Ordering::Relaxed) % backends.len()];
                    if let Ok(mut outbound) = TcpStream::connect(backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        return;
                    }
                }
            });
        }
    });
    url
}

/// Opens the device's link through `relay`, retrying while the bridge is not (yet) seen
/// online there.
async fn connect(device: &DeviceHome, relay: &str) -> Client {
    let record = device.bridge(None).unwrap();
    let mut last = String::new();
    for _ in 0..200 {
        match Connection::open(device, &record, Some(relay)).await {
            Ok(c) => return Client::remote(c),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no link through {relay}: {last}");
}

/// Pairs a new device through the relay node at `relay` (its HTTP pairing broker).
async fn pair_through(paired: &support::remote::Paired, relay: &str, name: &str) -> (tempfile::TempDir, DeviceHome) {
    let link = support::remote::offer_link(&paired.home(), Some(relay.to_owned()), None, 60);
    let dir = tempfile::tempdir().unwrap();
    let device = DeviceHome::at(dir.path());
    let http = relay.replacen("ws://", "http://", 1);
    for _ in 0..100 {
        if terminull_client::pairing::pair(&device, &link.to_url(&http), name, None).await.is_ok() {
            return (dir, device);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} could not pair through {relay}");
}

/// Three nodes on one Postgres and NATS, and the round-robin proxy in front of them.
struct Cluster {
    _pg: Postgres,
    store: String,
    _nats: Nats,
    nodes: Vec<Node>,
    proxy: String,
}

async fn cluster() -> Cluster {
    support::remote::logs();
    let (pg, nats) = (Postgres::start(), Nats::start());
    let store = pg.url("postgres");
    let nodes: Vec<Node> = (0..3).map(|_| Node::start(&store, &nats.url())).collect();
    let proxy = round_robin(nodes.iter().map(Node::addr).collect()).await;
    Cluster { _pg: pg, store, _nats: nats, nodes, proxy }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_on_node_1_serves_devices_on_nodes_2_and_3_turns_permissions_pairing_and_held_pushes() {
    let c = cluster().await;
    let paired = support::remote::paired_bridge().await;
    // The proxy's first connection goes to node 1.
    support::remote::connect_to_relay(&paired, c.proxy.clone());
    let (n1, n2, n3) = (&c.nodes[0].url, &c.nodes[1].url, &c.nodes[2].url);

    // A phone pairs through node 3's broker with the bridge on node 1.
    let (_phone_dir, phone) = pair_through(&paired, n3, "phone").await;

    // The first device, on node 2: a full turn.
    let cwd = tempfile::tempdir().unwrap();
    let mut laptop = connect(&paired.device, n2).await;
    let mut transcript = Transcript::new();
    let session = support::remote::start_echo_session(&mut laptop, cwd.path(), &mut transcript).await;
    support::remote::say(&mut laptop, &session, "hello across nodes", &mut transcript).await;
    support::remote::until_turn_end(&mut laptop, &mut transcript).await;
    assert!(support::remote::texts(&transcript).iter().any(|t| t == "You said: hello across nodes"));
    support::remote::assert_complete(&transcript, &support::remote::history(paired.bridge_home.path(), &session));

    // The phone, on node 3: a turn that asks for permission, answered from node 3.
    let mut phone_client = connect(&phone, n3).await;
    let mut phone_transcript = Transcript::new();
    let phone_session = support::remote::start_echo_session(&mut phone_client, cwd.path(), &mut phone_transcript).await;
    support::remote::say(&mut phone_client, &phone_session, "ask may I echo this", &mut phone_transcript).await;
    let request_id = loop {
        if let BridgeMessage::Block { block, .. } = support::remote::next_within(&mut phone_client, 30).await {
            let request = match &block.kind {
                BlockKind::PermissionRequest(p) => Some(p.request_id.clone()),
                _ => None,
            };
            assert_eq!(phone_transcript.apply(block), Applied::Added, "a block arrived twice");
            if let Some(id) = request {
                break id;
            }
        }
    };
    let answer = ControlMessage::PermissionResponse(control::PermissionResponse {
        session_id: phone_session.clone(),
        request_id,
        option_id: "allow".into(),
    });
    let mut kept = Vec::new();
    phone_client.call(answer, &mut kept).await.expect("the permission answer is accepted");
    support::remote::apply_blocks(kept, &mut phone_transcript);
    support::remote::until_turn_end(&mut phone_client, &mut phone_transcript).await;
    let texts = support::remote::texts(&phone_transcript);
    assert!(texts.iter().any(|t| t == "You said: ask may I echo this"), "{texts:?}");
    support::remote::assert_complete(
        &phone_transcript,
        &support::remote::history(paired.bridge_home.path(), &phone_session),
    );

    // The laptop goes offline; a turn of the phone finishes meanwhile: the bridge's
    // notification for the laptop is held, and delivered when it connects to node 1.
    drop(laptop);
    tokio::time::sleep(Duration::from_millis(500)).await;
    support::remote::say(&mut phone_client, &phone_session, "while the laptop sleeps", &mut phone_transcript).await;
    support::remote::until_turn_end(&mut phone_client, &mut phone_transcript).await;
    // Held: in the shared database, before the laptop connects anywhere.
    let (db, conn) = tokio_postgres::connect(&c.store, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let laptop_id = paired.device_identity.public().device_id().0;
    let mut held = 0;
    for _ in 0..200 {
        let query = "SELECT count(*) FROM relay_push_queue WHERE device_id = $1";
        held = db.query_one(query, &[&laptop_id]).await.unwrap().get::<_, i64>(0);
        if held > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(held > 0, "the bridge's notification for the offline laptop is held");
    let offline = Connection::open(&paired.device, &paired.record, Some(n1)).await.expect("link");
    let stats = offline.info.stats.clone();
    for _ in 0..200 {
        if stats.pushes.load(Ordering::Relaxed) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let notices: Vec<serde_json::Value> = stats.notices.lock().unwrap().iter().cloned().collect();
    assert!(
        notices.iter().any(|n| n["kind"] == "turn_finished" && n["session_id"] == phone_session.as_str()),
        "the push held while the laptop was offline reaches it on another node: {notices:?}"
    );
    eprintln!("cluster: turns on nodes 2 and 3, permission answered from node 3, held push delivered on node 1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridges_node_killed_mid_turn_the_bridge_moves_and_the_device_gets_every_block_once() {
    let mut c = cluster().await;
    let paired = support::remote::paired_bridge().await;
    support::remote::connect_to_relay(&paired, c.proxy.clone());
    let n2 = c.nodes[1].url.clone();
    let cwd = tempfile::tempdir().unwrap();
    let mut client = connect(&paired.device, &n2).await;
    let mut transcript = Transcript::new();
    let session = support::remote::start_echo_session(&mut client, cwd.path(), &mut transcript).await;
    let words: Vec<String> = (1..=20).map(|i| format!("w{i}")).collect();
    let text = format!("slow {}", words.join(" "));
    support::remote::say(&mut client, &session, &text, &mut transcript).await;
    let mut taken = 0;
    while taken < 3 {
        if let BridgeMessage::Block { block, .. } = support::remote::next_within(&mut client, 20).await {
            assert_eq!(transcript.apply(block), Applied::Added, "a block arrived twice");
            taken += 1;
        }
    }

    // Node 1, which holds the bridge, is killed mid-turn.
    let killed_at = std::time::Instant::now();
    c.nodes[0].kill();
    // The device's link (through node 1) ends once the bridge registered elsewhere.
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(message) = client.next().await {
            if let BridgeMessage::Block { block, .. } = message {
                assert_eq!(transcript.apply(block), Applied::Added, "a block arrived twice");
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the device's link ends when its bridge moves");
    let moved_after = killed_at.elapsed();

    client = connect(&paired.device, &n2).await;
    let resume = ControlMessage::SessionResume(control::SessionResume {
        session_id: session.clone(),
        since_seq: Some(transcript.last_seq()),
        since_ts: None,
        app_pubkey: String::new(),
    });
    let mut kept = Vec::new();
    client.call(resume, &mut kept).await.expect("resumed");
    support::remote::apply_blocks(kept, &mut transcript);
    support::remote::until_turn_end(&mut client, &mut transcript).await;
    let texts = support::remote::texts(&transcript);
    assert!(texts.iter().any(|t| t == &format!("You said: {text}")), "{texts:?}");
    support::remote::assert_complete(&transcript, &support::remote::history(paired.bridge_home.path(), &session));
    eprintln!(
        "cluster: node 1 killed mid-turn; the device's link ended {:.1} s later, resumed on node 2 at seq {}, turn complete, every block once",
        moved_after.as_secs_f64(),
        transcript.last_seq()
    );
}
