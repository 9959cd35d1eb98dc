//! Streaming: one long answer streamed in small chunks (`bench stream TOTAL CHUNK` of the
//! echo adapter), measured on every hop it crosses — the adapter's stdout, the
//! session's log on disk, and each path a device can use (in process, the local
//! socket, the LAN server, the relay; the last two with coalescing off and on) — each
//! against the final text. On every path the device rebuilds the answer from the
//! chunks it received, and it must be the adapter's to the byte.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use terminull_adapter_check::recording::{Script, record};
use terminull_bridge::daemon_client::Client;
use terminull_bridge::local;
use terminull_protocol::blocks::BlockKind;
use terminull_protocol::control::BridgeMessage;
use terminull_protocol::ids::SessionId;
use terminull_protocol::streamed::{Applied, Assembly};

use crate::report::Row;
use crate::sections::Scale;
use crate::setup::{self, Bridge, Received, Tools};
use crate::util::Helper;

/// How bytes were counted on a path.
enum Counted {
    /// JSON lines of the messages as received (the local socket's framing; in process,
    /// what the same messages would take on the socket).
    JsonLines,
    /// Bytes of WebSocket messages the device read (sealed frames).
    Wire(std::sync::Arc<terminull_client::connection::LinkStats>),
}

/// Every row of the section.
pub async fn streaming(tools: &Tools, bridge: &mut Bridge, scale: &Scale, cwd: &Path) -> Result<Vec<Row>> {
    let total = scale.stream_total;
    let prompt = format!("bench stream {total} {}", scale.stream_chunk);
    let mut rows = vec![adapter_stdout(tools, &prompt, total).await?];

    // In process and through the local socket: no link, so nothing is coalesced.
    let mut client = bridge.in_process();
    let (session, received, bytes) = answer(&mut client, &prompt, cwd, &Counted::JsonLines).await?;
    rows.push(path_row("in process", "no coalescing on this path", &received, bytes, &Counted::JsonLines, total)?);
    rows.push(stored_row(bridge, &session, total)?);
    drop(client);

    let socket_dir = tempfile::tempdir()?;
    let socket = socket_dir.path().join("bridge.sock");
    let listener = local::bind(&socket).await.context("binding the local socket")?;
    let server = tokio::spawn(local::serve(bridge.service.clone(), listener));
    let mut client = Client::connect(&socket).await.context("connecting to the local socket")?;
    let (_, received, bytes) = answer(&mut client, &prompt, cwd, &Counted::JsonLines).await?;
    rows.push(path_row("local socket", "no coalescing on this path", &received, bytes, &Counted::JsonLines, total)?);
    drop(client);
    server.abort();

    let data = tempfile::tempdir()?;
    let relay = Helper::start(&tools.self_exe, &["relay-child", "--data", &data.path().display().to_string()]).await?;
    // Unpaced, the adapter's pacer joins the deltas before the bridge sees them; one
    // delta a millisecond (a fast model's rate) reaches the bridge as many appends.
    let paced = format!("{prompt} 1000");
    for (coalesce, prompt) in [(false, &prompt), (false, &paced), (true, &prompt)] {
        let label = match (coalesce, prompt == &paced) {
            (true, _) => "coalescing on (the default)".to_owned(),
            (false, false) => "coalescing off".to_owned(),
            (false, true) => "coalescing off, a delta every 1 ms".to_owned(),
        };
        let (lan, ctx) = bridge.lan(coalesce).await?;
        let (mut client, stats) = bridge.open_lan(&lan).await?;
        let counted = Counted::Wire(stats);
        let (_, received, bytes) = answer(&mut client, prompt, cwd, &counted).await?;
        let joined = ctx.coalesced.load(std::sync::atomic::Ordering::Relaxed);
        let row = if prompt == &paced { path_row_of } else { path_row };
        rows.push(row("LAN", &format!("{label}, {joined} joined"), &received, bytes, &counted, total)?);
        drop(client);
        lan.stop();

        let ctx = bridge.connect_relay_with(&relay.url, coalesce);
        let (mut client, stats) = bridge.open_relay(&relay.url).await?;
        let counted = Counted::Wire(stats);
        let (_, received, bytes) = answer(&mut client, prompt, cwd, &counted).await?;
        let joined = ctx.coalesced.load(std::sync::atomic::Ordering::Relaxed);
        rows.push(row("relay", &format!("{label}, {joined} joined"), &received, bytes, &counted, total)?);
        drop(client);
    }
    bridge.disconnect_relay();
    relay.stop().await;
    Ok(rows)
}

/// Starts an echo session, lets its greeting pass, and streams the answer to `prompt`;
/// the link's bytes are counted from the turn on.
async fn answer(
    client: &mut Client,
    prompt: &str,
    cwd: &Path,
    counted: &Counted,
) -> Result<(SessionId, Vec<Received>, u64)> {
    let session = setup::start_session(client, cwd).await?;
    setup::drain(client, Duration::from_millis(50)).await;
    let before = counted.wire_bytes();
    let received = setup::turn(client, &session, prompt).await?;
    let bytes = match counted {
        Counted::JsonLines => json_line_bytes(&received)?,
        Counted::Wire(_) => counted.wire_bytes() - before,
    };
    Ok((session, received, bytes))
}

/// What the blocks take as JSON lines on the local socket.
fn json_line_bytes(received: &[Received]) -> Result<u64> {
    let mut bytes = 0;
    for r in received {
        let message =
            BridgeMessage::Block { session_id: SessionId(String::new()), block: r.block.clone(), replay: false };
        bytes += serde_json::to_vec(&message)?.len() as u64 + 1;
    }
    Ok(bytes)
}

impl Counted {
    fn wire_bytes(&self) -> u64 {
        match self {
            Counted::JsonLines => 0,
            Counted::Wire(stats) => stats.bytes_in.load(std::sync::atomic::Ordering::Relaxed),
        }
    }
}

/// The bytes the echo adapter writes to stdout for the turn: the adapter run by the
/// conformance recorder behind a `tee` that keeps its stdout as written.
async fn adapter_stdout(tools: &Tools, prompt: &str, total: usize) -> Result<Row> {
    let dir = tempfile::tempdir()?;
    let kept = dir.path().join("stdout");
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
    let command = format!("{} | tee {}", quote(&tools.echo_rs), quote(&kept));
    let script = Script { prompt: prompt.to_owned(), ..Script::default() };
    record("sh", &["-c".to_owned(), command], &script).await.context("driving echo-rs through one turn")?;
    let bytes = std::fs::metadata(&kept).with_context(|| format!("reading {}", kept.display()))?.len();
    let text = std::fs::read_to_string(&kept)?;
    let lines = text.lines().filter(|l| l.contains("\"stream\"")).count();
    let measure = format!("bytes echo-rs writes for a {total} B answer, {lines} stream lines (whole session)");
    Ok(within_twice("streaming (adapter stdout)", measure, bytes, total))
}

/// A bytes row held to issue 18's "≤ 2× the final text".
fn within_twice(hop: &str, measure: String, bytes: u64, total: usize) -> Row {
    Row::new(hop, measure, bytes as f64, "B")
        .floor("final text", total as f64)
        .target("≤ 2× the final text", bytes as f64 <= 2.0 * total as f64)
}

/// What the session keeps of the answer on disk.
fn stored_row(bridge: &Bridge, session: &SessionId, total: usize) -> Result<Row> {
    let log = bridge.home.sessions().join(session.as_str()).join(terminull_bridge::history::log::DATA_FILE);
    let stored = std::fs::metadata(&log).with_context(|| format!("reading {}", log.display()))?.len();
    Ok(within_twice(
        "streaming (history)",
        format!("the session's blocks.jsonl after the {total} B answer"),
        stored,
        total,
    ))
}

/// Checks that the answer rebuilds exactly and gives the path's bytes row.
fn path_row(path: &str, note: &str, received: &[Received], bytes: u64, counted: &Counted, total: usize) -> Result<Row> {
    path_row_of(path, note, received, bytes, counted, total).map(|row| {
        let met = row.value <= 1.5 * total as f64;
        row.target("≤ 1.5× the final text", met)
    })
}

/// [`path_row`] without a target: the paced run, which the issue's table does not hold
/// to one (each append pays its frame's fixed cost, ~430 B with the sealed header).
fn path_row_of(
    path: &str,
    note: &str,
    received: &[Received],
    bytes: u64,
    counted: &Counted,
    total: usize,
) -> Result<Row> {
    let chunks = rebuild(received, total).with_context(|| format!("the answer through {path}"))?;
    let what = match counted {
        Counted::JsonLines => "JSON-line bytes",
        Counted::Wire(_) => "wire bytes of the turn",
    };
    Ok(Row::new(
        &format!("streaming ({path})"),
        format!("{what}, {total} B answer in {chunks} chunks, rebuilt exactly; {note}"),
        bytes as f64,
        "B",
    )
    .floor("final text", total as f64))
}

/// Rebuilds the answer from the turn's text chunks; the number of chunks, or why the
/// text is not the adapter's.
fn rebuild(received: &[Received], total: usize) -> Result<usize> {
    let mut answer = Assembly::default();
    let mut chunks = 0;
    let mut done = 0;
    for r in received {
        let BlockKind::Text(chunk) = &r.block.kind else { continue };
        chunks += 1;
        done += usize::from(chunk.done);
        if let Applied::Gap { held, offset } = answer.apply(chunk) {
            bail!("a gap in the streamed answer: {held} bytes held, a chunk at {offset}");
        }
    }
    if !answer.is_done() || answer.text() != expected_stream_text(total) {
        bail!("the answer arrived wrong: done={}, {} of {total} bytes", answer.is_done(), answer.len());
    }
    if done != 1 {
        bail!("the done=true chunk arrived {done} times");
    }
    Ok(chunks)
}

/// The answer of the echo adapter's `bench stream TOTAL CHUNK` (adapters/echo).
fn expected_stream_text(total: usize) -> String {
    "y".repeat(total)
}
