//! Frames across relay processes (`--bus nats://…`): a device connected to one node
//! reaches its bridge on another through NATS subjects per bridge
//! (docs/relay-operations.md, "Frames across nodes").
//!
//! Subjects, under `terminull.v1.bridge.<bridge_id>.`:
//!
//! - `up`: frames from device connections on other nodes toward the bridge
//!   (`link_hello`, `control`, `conn_closed`, `pair_request`), body `<node>\n<frame>`.
//!   Subscribed only by the node holding the bridge, while it holds it.
//! - `down.<node>`: frames from the bridge's node toward device connections on `node`,
//!   body `f <conn>\n` and length-prefixed frame texts, `k <conn>\n<kill>` (end that
//!   connection), or `p 0\n<pair_response>`. Each node subscribes to
//!   `terminull.v1.bridge.*.down.<its id>`.
//! - `presence`: `{"node","online","since","agents"}`, published by a node when a bridge
//!   registers with it or leaves it; every node subscribes to `*.presence`.
//! - `where`: a request answered by the node holding the bridge with its presence (no
//!   responder: the bridge is offline everywhere); a node asks when a device of a bridge
//!   it does not see online connects.
//! - `push`: a request `<node>\n<push frame>` for a device with no connection on the
//!   bridge's node; a node with a live connection of that device delivers it and
//!   answers. Nobody answers: the push is held as for an offline device.
//!
//! Each link's frames go through one bounded queue (in frames and bytes, as a socket's)
//! drained by one task that publishes in order, and NATS keeps one publisher's order on
//! one subject: order per link holds. A queue that overflows cuts the link off as a slow
//! consumer, as a socket's would. The relay forwards what it would have written to a
//! socket: sealed blocks and controls, never plaintext.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use terminull_protocol::BridgeId;
use terminull_protocol::relay::{AgentSummary, RelayError as ErrorBody};
use tokio::sync::mpsc;
use tokio_util::bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::conn::{ConnId, Kill, Outbound};
use crate::hub::Hub;

mod forward;

pub(crate) use forward::{down_proxy, up_proxy};

/// Subjects' common prefix.
const PREFIX: &str = "terminull.v1.bridge";
/// How long a node waits for the bridge's holder to answer `where` (a node that holds
/// the bridge answers at once; nobody holding it is known at once too, from NATS's
/// "no responders").
const WHERE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the bridge's node waits for another node to take a push.
const PUSH_TIMEOUT: Duration = Duration::from_millis(300);
/// Messages one subscription buffers before NATS drops (and logs) the rest; each at
/// most one relay message (`max_message_bytes`).
pub(crate) const SUBSCRIPTION_CAPACITY: usize = 1024;
/// How often a node says it is alive (`terminull.v1.node.<node>.alive`).
const HEARTBEAT: Duration = Duration::from_secs(2);
/// A node not heard from for this long is taken for dead: the bridges it held are
/// offline until they register elsewhere.
const SILENT: Duration = Duration::from_secs(7);
/// Most other nodes tracked (beyond: a node's heartbeats are not tracked).
const MAX_NODES: usize = 1024;

/// Most bytes of frames one `down` message carries (frames are never split: a bigger
/// frame goes alone).
const DOWN_MESSAGE_BYTES: usize = 256 * 1024;

/// Where a bridge is connected, as its node announces it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Presence {
    /// The node holding (or leaving) the bridge.
    pub node: String,
    /// Connected there (false: it left).
    pub online: bool,
    /// When that connection registered (Unix µs): the newest registration wins.
    pub since: u64,
    /// The bridge's agents.
    #[serde(default)]
    pub agents: Vec<AgentSummary>,
}

/// How a connection on another node is to end (a [`Kill`] on the wire).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct KillWire {
    error: Option<ErrorBody>,
    close_code: u16,
    reason: String,
}

/// What a `down` message carries.
#[derive(Debug)]
pub(crate) enum Down {
    /// Frames for device connection `conn`, in order.
    Frames(ConnId, Vec<String>),
    /// End device connection `conn`.
    Kill(ConnId, Kill),
    /// The bridge's answer to a pairing request made on this node.
    PairResponse(String),
}

/// The subject `terminull.v1.bridge.<bridge_id>.<what>`.
fn subject(bridge_id: &BridgeId, what: &str) -> String {
    format!("{PREFIX}.{bridge_id}.{what}")
}

/// The bridge id and the rest of a subject under [`PREFIX`].
fn split_subject(subject: &str) -> Option<(BridgeId, &str)> {
    let rest = subject.strip_prefix(PREFIX)?.strip_prefix('.')?;
    let (id, what) = rest.split_once('.')?;
    (!id.is_empty()).then(|| (BridgeId(id.to_owned()), what))
}

/// `<node>\n<text>`.
fn from_node(node: &str, text: &str) -> Bytes {
    let mut out = Vec::with_capacity(node.len() + 1 + text.len());
    out.extend_from_slice(node.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(text.as_bytes());
    out.into()
}

/// Splits `<node>\n<text>`.
fn split_from_node(payload: &[u8]) -> Option<(&str, &str)> {
    let text = std::str::from_utf8(payload).ok()?;
    text.split_once('\n')
}

/// Encodes frames for `conn`: `f <conn>\n` then each frame as a 4-byte big-endian length
/// and its bytes.
fn encode_frames(conn: ConnId, frames: &[String]) -> Bytes {
    let head = format!("f {conn}\n");
    let mut out = Vec::with_capacity(head.len() + frames.iter().map(|f| f.len() + 4).sum::<usize>());
    out.extend_from_slice(head.as_bytes());
    for frame in frames {
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(frame.as_bytes());
    }
    out.into()
}

/// Encodes a kill of `conn`.
fn encode_kill(conn: ConnId, kill: &Kill) -> Bytes {
    let wire = KillWire { error: kill.error.clone(), close_code: kill.close_code, reason: kill.reason.clone() };
    format!("k {conn}\n{}", serde_json::to_string(&wire).unwrap_or_default()).into_bytes().into()
}

/// Reads a `down` message.
fn decode_down(payload: &[u8]) -> Result<Down, String> {
    let newline = payload.iter().position(|b| *b == b'\n').ok_or("no header line")?;
    let head = std::str::from_utf8(&payload[..newline]).map_err(|_| "header is not UTF-8")?;
    let body = &payload[newline + 1..];
    let (kind, conn) = head.split_once(' ').ok_or("header without a connection")?;
    let conn: ConnId = conn.parse().map_err(|_| format!("connection `{conn}` is not a number"))?;
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).map_err(|_| "a frame is not UTF-8".to_owned());
    match kind {
        "f" => {
            let mut frames = Vec::new();
            let mut rest = body;
            while !rest.is_empty() {
                let (len, tail) = rest.split_first_chunk::<4>().ok_or("a frame length is cut")?;
                let len = u32::from_be_bytes(*len) as usize;
                if tail.len() < len {
                    return Err("a frame is cut".into());
                }
                frames.push(text(&tail[..len])?);
                rest = &tail[len..];
            }
            Ok(Down::Frames(conn, frames))
        }
        "k" => {
            let wire: KillWire = serde_json::from_slice(body).map_err(|e| format!("kill: {e}"))?;
            Ok(Down::Kill(
                conn,
                Kill { error: wire.error, close_code: wire.close_code, reason: wire.reason, flush_queue: false },
            ))
        }
        "p" => Ok(Down::PairResponse(text(body)?)),
        other => Err(format!("unknown kind `{other}`")),
    }
}

/// Splits queued items into `down` message bodies of at most [`DOWN_MESSAGE_BYTES`]
/// (a bigger frame alone), in order.
fn down_messages(conn: ConnId, items: Vec<Outbound>) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut frames: Vec<String> = Vec::new();
    let mut bytes = 0;
    for frame in items.into_iter().flat_map(|item| match item {
        Outbound::One(text) => vec![text],
        Outbound::Many(texts) => texts,
    }) {
        if !frames.is_empty() && bytes + frame.len() > DOWN_MESSAGE_BYTES {
            out.push(encode_frames(conn, &frames));
            frames.clear();
            bytes = 0;
        }
        bytes += frame.len();
        frames.push(frame);
    }
    if !frames.is_empty() {
        out.push(encode_frames(conn, &frames));
    }
    out
}

/// A command to the task that keeps the per-bridge subscriptions.
#[derive(Debug)]
enum Command {
    /// The bridge registered here: subscribe to its `up` and `where`, then announce.
    Hold(BridgeId, Presence),
    /// The bridge left (announce when `Some`): unsubscribe.
    Release(BridgeId, Option<Presence>),
}

/// This node's end of the cluster.
#[derive(Debug)]
pub(crate) struct Cluster {
    client: async_nats::Client,
    /// This node's id (random per start).
    pub node: String,
    /// Ordered: a hold and the release after it reach the subscription task in order. One
    /// command per bridge registration or disconnection, which are bounded by admission.
    commands: mpsc::UnboundedSender<Command>,
    /// When each other node was last heard from.
    heard: std::sync::Mutex<HashMap<String, std::time::Instant>>,
}

impl Cluster {
    /// The bridge registered with this node (at `since`, Unix µs).
    pub(crate) fn hold(&self, bridge_id: &BridgeId, since: u64, agents: Vec<AgentSummary>) {
        let presence = Presence { node: self.node.clone(), online: true, since, agents };
        let _ = self.commands.send(Command::Hold(bridge_id.clone(), presence));
    }

    /// The bridge left this node; `announce`: tell the others it is offline.
    pub(crate) fn release(&self, bridge_id: &BridgeId, since: u64, announce: bool) {
        let presence = announce.then(|| Presence { node: self.node.clone(), online: false, since, agents: Vec::new() });
        let _ = self.commands.send(Command::Release(bridge_id.clone(), presence));
    }

    /// Asks which node holds `bridge_id`; `None`: no node does (or none answered).
    pub(crate) async fn locate(&self, bridge_id: &BridgeId) -> Option<Presence> {
        let request = async_nats::Request::new().timeout(Some(WHERE_TIMEOUT));
        let reply = self.client.send_request(subject(bridge_id, "where"), request).await.ok()?;
        serde_json::from_slice::<Presence>(&reply.payload).ok().filter(|p| p.online && p.node != self.node)
    }

    /// Offers a push for a device with no connection here to the other nodes; true when
    /// one delivered it.
    pub(crate) async fn offer_push(&self, bridge_id: &BridgeId, text: &str) -> bool {
        let request = async_nats::Request::new().timeout(Some(PUSH_TIMEOUT)).payload(from_node(&self.node, text));
        self.client.send_request(subject(bridge_id, "push"), request).await.is_ok()
    }

    /// `node` is alive (a heartbeat, or it announced a bridge).
    pub(crate) fn heard_from(&self, node: &str) {
        let mut heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
        if heard.len() < MAX_NODES || heard.contains_key(node) {
            heard.insert(node.to_owned(), std::time::Instant::now());
        }
    }

    /// The nodes silent for [`SILENT`], forgotten as they are reported.
    fn silent_nodes(&self) -> Vec<String> {
        let mut heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
        let silent: Vec<String> = heard.iter().filter(|(_, t)| t.elapsed() >= SILENT).map(|(n, _)| n.clone()).collect();
        for node in &silent {
            heard.remove(node);
        }
        silent
    }

    /// Sends the bridge's answer to a pairing request made on `node`.
    pub(crate) async fn send_pair_response(&self, bridge_id: &BridgeId, node: &str, text: &str) {
        let body = format!("p 0\n{text}");
        if let Err(e) = self.client.publish(subject(bridge_id, &format!("down.{node}")), body.into()).await {
            tracing::warn!(%bridge_id, %node, error = %e, "sending a pairing answer to another node failed");
        }
    }

    /// Announces that `bridges` (with the `since` of their connection here) leave this
    /// node, and waits (at most [`WHERE_TIMEOUT`]) until NATS has them.
    pub(crate) async fn announce_offline(&self, bridges: &[(BridgeId, u64)]) {
        let announce = async {
            for (bridge_id, since) in bridges {
                let presence = Presence { node: self.node.clone(), online: false, since: *since, agents: Vec::new() };
                publish_presence(&self.client, bridge_id, &presence).await;
            }
            let _ = self.client.flush().await;
        };
        if tokio::time::timeout(WHERE_TIMEOUT, announce).await.is_err() {
            tracing::warn!(bridges = bridges.len(), "announcing this node's bridges as leaving timed out");
        }
    }

    fn client(&self) -> &async_nats::Client {
        &self.client
    }
}

/// Starts the cluster on `client` as `node`: the `down`, `presence` and `push`
/// subscriptions and the per-bridge subscription keeper. The hub gets its handle.
pub(crate) async fn start(hub: &Arc<Hub>, client: async_nats::Client, node: String) -> Result<(), String> {
    let sub = |s: String| {
        let client = client.clone();
        async move { client.subscribe(s.clone()).await.map_err(|e| format!("subscribing on {s}: {e}")) }
    };
    let mut down = sub(format!("{PREFIX}.*.down.{node}")).await?;
    let mut presence = sub(format!("{PREFIX}.*.presence")).await?;
    let mut pushes = sub(format!("{PREFIX}.*.push")).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    let mut alive = sub("terminull.v1.node.*.alive".to_owned()).await?;
    let cluster = Arc::new(Cluster {
        client: client.clone(),
        node: node.clone(),
        commands: tx,
        heard: std::sync::Mutex::new(HashMap::new()),
    });
    // Heartbeats: ours out, the others' in; a node silent too long is taken for dead.
    let (beat_hub, beat_client, beat_subject) =
        (Arc::clone(hub), client.clone(), format!("terminull.v1.node.{node}.alive"));
    let beat_cluster = Arc::clone(&cluster);
    hub.tasks.spawn(async move {
        let mut tick = tokio::time::interval(HEARTBEAT);
        while until_stopped(&beat_hub.shutdown, tick.tick()).await.is_some() {
            if let Err(e) = beat_client.publish(beat_subject.clone(), Bytes::new()).await {
                tracing::warn!(error = %e, "saying this node is alive failed");
            }
            let silent = beat_cluster.silent_nodes();
            if !silent.is_empty() {
                beat_hub.nodes_gone(&silent);
            }
        }
    });
    let (alive_cluster, own_node, alive_stop) = (Arc::clone(&cluster), node.clone(), hub.shutdown.clone());
    hub.tasks.spawn(async move {
        while let Some(message) = until_stopped(&alive_stop, alive.next()).await.flatten() {
            let other = message.subject.strip_prefix("terminull.v1.node.").and_then(|s| s.strip_suffix(".alive"));
            if let Some(other) = other.filter(|n| *n != own_node && !n.contains('.')) {
                alive_cluster.heard_from(other);
            }
        }
    });
    hub.set_cluster(Arc::clone(&cluster));

    hub.tasks.spawn(keep_subscriptions(Arc::clone(hub), client.clone(), rx));
    let down_hub = Arc::clone(hub);
    hub.tasks.spawn(async move {
        while let Some(message) = until_stopped(&down_hub.shutdown, down.next()).await.flatten() {
            let Some((bridge_id, _)) = split_subject(&message.subject) else { continue };
            match decode_down(&message.payload) {
                Ok(down) => down_hub.down_from_cluster(&bridge_id, down),
                Err(e) => tracing::warn!(subject = %message.subject, error = %e, "ignoring an unreadable bus message"),
            }
        }
    });
    let presence_hub = Arc::clone(hub);
    let own = node.clone();
    hub.tasks.spawn(async move {
        while let Some(message) = until_stopped(&presence_hub.shutdown, presence.next()).await.flatten() {
            let Some((bridge_id, _)) = split_subject(&message.subject) else { continue };
            match serde_json::from_slice::<Presence>(&message.payload) {
                Ok(p) if p.node == own => {}
                Ok(p) => presence_hub.apply_presence(&bridge_id, p),
                Err(e) => tracing::warn!(subject = %message.subject, error = %e, "ignoring an unreadable presence"),
            }
        }
    });
    let push_hub = Arc::clone(hub);
    let push_client = client;
    hub.tasks.spawn(async move {
        while let Some(message) = until_stopped(&push_hub.shutdown, pushes.next()).await.flatten() {
            let Some((bridge_id, _)) = split_subject(&message.subject) else { continue };
            let Some((from, text)) = split_from_node(&message.payload) else { continue };
            if from == node {
                continue;
            }
            if push_hub.push_from_cluster(&bridge_id, text)
                && let Some(reply) = message.reply
                && let Err(e) = push_client.publish(reply, Bytes::from_static(b"delivered")).await
            {
                tracing::warn!(error = %e, "answering a push offer failed");
            }
        }
    });
    Ok(())
}

/// `next`, or `None` once the relay stops.
async fn until_stopped<T>(stop: &CancellationToken, next: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        value = next => Some(value),
        _ = stop.cancelled() => None,
    }
}

/// Keeps one subscription task per bridge held here (its `up` frames and `where`
/// requests), in the order of the hub's holds and releases.
async fn keep_subscriptions(hub: Arc<Hub>, client: async_nats::Client, mut commands: mpsc::UnboundedReceiver<Command>) {
    let mut held: HashMap<BridgeId, CancellationToken> = HashMap::new();
    while let Some(command) = until_stopped(&hub.shutdown, commands.recv()).await.flatten() {
        match command {
            Command::Hold(bridge_id, presence) => {
                if !held.contains_key(&bridge_id) {
                    let stop = hub.shutdown.child_token();
                    match subscribe_bridge(&hub, &client, &bridge_id, stop.clone()).await {
                        Ok(()) => {
                            held.insert(bridge_id.clone(), stop);
                        }
                        Err(e) => tracing::warn!(%bridge_id, error = %e, "subscribing to a bridge's frames failed"),
                    }
                }
                publish_presence(&client, &bridge_id, &presence).await;
            }
            Command::Release(bridge_id, presence) => {
                if let Some(stop) = held.remove(&bridge_id) {
                    stop.cancel();
                }
                if let Some(presence) = presence {
                    publish_presence(&client, &bridge_id, &presence).await;
                }
            }
        }
    }
}

async fn publish_presence(client: &async_nats::Client, bridge_id: &BridgeId, presence: &Presence) {
    let body = serde_json::to_vec(presence).unwrap_or_default();
    if let Err(e) = client.publish(subject(bridge_id, "presence"), body.into()).await {
        tracing::warn!(%bridge_id, error = %e, "announcing where a bridge is failed");
    }
}

/// Subscribes to `bridge_id`'s `up` and `where` subjects until `stop`.
async fn subscribe_bridge(
    hub: &Arc<Hub>,
    client: &async_nats::Client,
    bridge_id: &BridgeId,
    stop: CancellationToken,
) -> Result<(), async_nats::SubscribeError> {
    let mut up = client.subscribe(subject(bridge_id, "up")).await?;
    let mut asks = client.subscribe(subject(bridge_id, "where")).await?;
    let (up_hub, up_stop, id) = (Arc::clone(hub), stop.clone(), bridge_id.clone());
    hub.tasks.spawn(async move {
        while let Some(message) = until_stopped(&up_stop, up.next()).await.flatten() {
            match split_from_node(&message.payload) {
                Some((node, text)) => up_hub.up_from_cluster(&id, node, text),
                None => tracing::warn!(subject = %message.subject, "ignoring an unreadable bus message"),
            }
        }
        let _ = up.unsubscribe().await;
    });
    let (where_hub, id, client) = (Arc::clone(hub), bridge_id.clone(), client.clone());
    hub.tasks.spawn(async move {
        while let Some(message) = until_stopped(&stop, asks.next()).await.flatten() {
            let (Some(reply), Some(presence)) = (message.reply, where_hub.local_presence(&id)) else { continue };
            let body = serde_json::to_vec(&presence).unwrap_or_default();
            if let Err(e) = client.publish(reply, body.into()).await {
                tracing::warn!(bridge_id = %id, error = %e, "answering where a bridge is failed");
            }
        }
        let _ = asks.unsubscribe().await;
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_messages_keep_frames_whole_and_in_order_and_read_back() {
        let big = "b".repeat(DOWN_MESSAGE_BYTES + 10);
        let items = vec![
            Outbound::One("one".into()),
            Outbound::Many(vec!["two\nlines".into(), big.clone()]),
            Outbound::One("three".into()),
        ];
        let messages = down_messages(7, items);
        assert_eq!(messages.len(), 3, "the big frame travels alone");
        let frames: Vec<String> = messages
            .iter()
            .flat_map(|m| match decode_down(m).unwrap() {
                Down::Frames(7, frames) => frames,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(frames, vec!["one".to_owned(), "two\nlines".into(), big, "three".into()]);
    }

    #[test]
    fn a_cut_or_unknown_down_message_is_refused_with_the_reason() {
        assert_eq!(decode_down(b"f 1\n\0\0\0\x09abc").unwrap_err(), "a frame is cut");
        assert_eq!(decode_down(b"x 1\n").unwrap_err(), "unknown kind `x`");
        assert_eq!(decode_down(b"f one\n").unwrap_err(), "connection `one` is not a number");
        let kill = Kill::close(1012, "moved");
        match decode_down(&encode_kill(3, &kill)).unwrap() {
            Down::Kill(3, k) => assert_eq!((k.close_code, k.reason.as_str()), (1012, "moved")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn subjects_name_their_bridge() {
        let id = BridgeId("brg_abc".into());
        assert_eq!(split_subject(&subject(&id, "down.n1")), Some((id.clone(), "down.n1")));
        assert_eq!(split_subject("terminull.v1.other.x.up"), None);
    }
}
