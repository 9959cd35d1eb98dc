// The app's protocol modules (crypto.js, link.js, transcript.js) against a real
// bridge, from Node with the `ws` package: pairs with a pairing link, opens a link,
// starts an echo session, runs a turn, then reconnects and resumes by seq.
//
//   node web/tools/protocol-smoke.mjs --link '<pairing link>' [--cwd DIR]
//
// A debugging aid for the protocol without a browser; prints one JSON line.

import WebSocket from 'ws';
import * as c from '../src/crypto.js';
import { openLink } from '../src/link.js';
import { Transcript } from '../src/transcript.js';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
if (!args.link) {
  console.error('usage: node protocol-smoke.mjs --link URL [--cwd DIR]');
  process.exit(2);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const origin = new URL(args.link).origin;

async function main() {
  const link = c.parsePairingLink(args.link);
  const identity = c.generateIdentity();
  const { request, pending } = c.pairRequest(link, identity, 'node smoke');
  const res = await fetch(`${origin}/v1/bridges/${link.bridgeId}/pair`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(request),
  });
  const answer = await res.json();
  if (res.status !== 200) throw new Error(`pairing refused (${res.status}): ${JSON.stringify(answer)}`);
  const paired = c.finishPairing(pending, answer);
  console.error(`paired, short code ${paired.shortCode}`);
  const kind = await fetch(`${origin}/v1/server`).then((r) => (r.ok ? r.json() : { kind: '?' })).catch(() => ({ kind: '?' }));
  const direct = kind.kind === 'lan';
  const wsUrl = origin.replace(/^http/, 'ws') + '/v1/client';
  const transcript = new Transcript();
  const events = [];
  const rejects = [];
  const handlers = {
    onBlock: (sid, block, replay) => {
      events.push({ sid, seq: block.seq, type: block.type, replay });
      transcript.apply(block);
    },
    onReplayDone: (sid, last) => events.push({ sid, replay_done: last }),
    onReject: (r) => rejects.push(r),
  };
  const bridge = { bridgeId: link.bridgeId, keys: link.bridge };
  let l = await openLink({ url: wsUrl, identity, bridge, direct, WebSocket, ...handlers });
  const agents = await l.refreshAgents();
  console.error(`link open; agents ${agents.map((a) => a.agent_id).join(', ')}`);
  const started = await l.request({ type: 'session_request', agent: 'echo', cwd: args.cwd ?? process.cwd() });
  const sid = started.session_id;
  await l.request({ type: 'user_message', session_id: sid, text: 'hello from node' });
  const waitEnd = async (n) => {
    for (let i = 0; i < 200; i++) {
      if (transcript.blocks().filter((b) => b.type === 'session_end').length >= n) return;
      await sleep(50);
    }
    throw new Error('no session_end');
  };
  await waitEnd(1);
  const sessions = await l.request({ type: 'list_sessions' });
  // A slow turn, cut mid-stream, resumed on a new link.
  await l.request({ type: 'user_message', session_id: sid, text: 'slow a b c d e f g h' });
  await sleep(700);
  l.close();
  const before = transcript.lastSeq;
  l = await openLink({ url: wsUrl, identity, bridge, direct, WebSocket, ...handlers });
  await l.request({ type: 'session_resume', session_id: sid, since_seq: before });
  await waitEnd(2);
  let models = null;
  try {
    models = await l.request({ type: 'list_models', agent: 'echo' });
  } catch (e) {
    models = { error: e.code };
  }
  let external = null;
  try {
    external = await l.request({ type: 'scan_external_sessions' });
  } catch (e) {
    external = { error: e.code };
  }
  l.close();
  const text = transcript.entries().filter((b) => b.type === 'text').map((b) => b.text);
  console.log(
    JSON.stringify({
      ok: true,
      path: kind.kind,
      session_id: sid,
      seqs: transcript.seqs(),
      texts: text,
      resumed_after: before,
      sessions: sessions.sessions?.length,
      models,
      external,
      rejects,
      events: events.length,
    }),
  );
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(`FAILED: ${e.stack ?? e}`);
    process.exit(1);
  },
);
