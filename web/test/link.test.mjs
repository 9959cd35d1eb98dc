// link.js against an in-process bridge that speaks the device side of docs/relay.md
// with the crypto module's bridge-side helpers: the handshake, sealed controls and
// their replies, session keys from the attach, blocks — and hostile input (tampered,
// relabelled, replayed, foreign, malformed) refused and counted, never thrown.
// Run: node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as c from '../src/crypto.js';
import { openLink, TOKEN_WAIT_MS } from '../src/link.js';
import { FakeBridge } from '../tools/fake-bridge.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The browser-like WebSocket the link uses, wired to a FakeBridge connection. */
function fakeWebSocket(bridge) {
  return class FakeWS {
    constructor(url) {
      this.url = url;
      // As a real socket: frames arrive in later tasks, never inside send().
      this.conn = bridge.connect((text) => setTimeout(() => this.onmessage?.({ data: text }), 0));
      bridge.ws = this;
    }
    send(data) {
      this.conn.receive(data);
    }
    close() {
      this.conn.closed = true;
      setTimeout(() => this.onclose?.({ reason: '' }), 0);
    }
  };
}

/** Delivers a frame (object or raw text) to the device now. */
function deliver(bridge, frame) {
  bridge.ws.onmessage?.({ data: typeof frame === 'string' ? frame : JSON.stringify(frame) });
}

async function connect(bridge) {
  const device = c.generateIdentity();
  bridge.addDevice(device);
  const got = { blocks: [], rejects: [], statuses: [], closed: null };
  const link = await openLink({
    url: 'ws://bridge.test/v1/client',
    identity: device,
    bridge: { bridgeId: bridge.bridgeId, keys: bridge.keys },
    direct: bridge.direct,
    WebSocket: fakeWebSocket(bridge),
    onBlock: (sid, block, replay) => got.blocks.push({ sid, block, replay }),
    onReject: (r) => got.rejects.push(r),
    onStatus: (s) => got.statuses.push(s),
    onClose: (r) => (got.closed = r),
  });
  return { link, got, device };
}

const block = (bridge, sid, b, opts) => bridge.ws.conn.block(sid, b, opts);

test('handshake, a session, its blocks; hostile input refused and counted', async () => {
  const bridge = new FakeBridge();
  const { link, got } = await connect(bridge);
  assert.deepEqual(link.agents.map((a) => a.agent_id), ['echo']);
  const started = await link.request({ type: 'session_request', agent: 'echo', cwd: '/tmp', app_pubkey: 'ignored' });
  assert.equal(started.session_id, 's-1');
  assert.notEqual(bridge.controls.at(-1).app_pubkey, 'ignored', 'a fresh attachment key replaces the caller’s');

  const b1 = block(bridge, 's-1', { type: 'agent_info', seq: 1, ts: 1, agent_id: 'echo', name: 'Echo' });
  const b2 = block(bridge, 's-1', { type: 'text', seq: 2, ts: 1, id: 'm', text: 'Hi', done: true });
  deliver(bridge, b1);
  deliver(bridge, b2);
  assert.deepEqual(got.blocks.map((b) => b.block.seq), [1, 2]);

  // Replayed, reordered, tampered, relabelled, flipped, for an unknown session, garbage.
  deliver(bridge, b2);
  deliver(bridge, b1);
  const b3 = block(bridge, 's-1', { type: 'text', seq: 3, ts: 1, id: 'm2', text: 'x', done: true });
  const tampered = { ...b3, enc: c.b64(c.fromB64(b3.enc).map((x, i) => (i === 20 ? x ^ 1 : x))) };
  deliver(bridge, tampered);
  deliver(bridge, { ...b3, block_type: 'error' });
  deliver(bridge, { ...b3, replay: true });
  deliver(bridge, { ...b3, session_id: 's-9' });
  deliver(bridge, 'not json');
  deliver(bridge, '[1,2]');
  deliver(bridge, { type: 'block' });
  deliver(bridge, { type: 'reply', body: 'AAAA' });
  deliver(bridge, { type: 'reply', body: 42 });
  deliver(bridge, { type: 'link_hello' });
  deliver(bridge, { type: 'push', kind: 'x', payload: '!!' });
  assert.equal(got.blocks.length, 2, 'nothing hostile got through');
  assert.equal(link.rejected, 13, got.rejects.join('\n'));
  // The genuine block still opens afterwards: forgeries did not move the counter.
  deliver(bridge, b3);
  assert.deepEqual(got.blocks.map((b) => b.block.seq), [1, 2, 3]);

  // A block whose plaintext type differs from its envelope, or without a seq.
  deliver(bridge, c.sealBlock(bridge.ws.conn.sessions.get('s-1'), bridge.identity, 's-1', 'text', false, 1, JSON.stringify({ type: 'error', seq: 4, ts: 1 })));
  deliver(bridge, block(bridge, 's-1', { type: 'text', ts: 1, id: 'z', text: '', done: true }));
  assert.equal(got.blocks.length, 3);
  assert.equal(link.rejected, 15);

  // An error reply rejects the request with its code.
  bridge.handlers.list_agents = () => ({ error: { code: 'busy', message: 'no' } });
  await assert.rejects(link.request({ type: 'list_agents' }), (e) => e.code === 'busy');
  link.close();
  await sleep(5);
  assert.ok(got.closed);
  await assert.rejects(link.request({ type: 'list_sessions' }), (e) => e.code === 'link');
});

test('a link_accept not signed by the pinned bridge key is refused', async () => {
  const bridge = new FakeBridge({ forgeAccept: true });
  await assert.rejects(connect(bridge), /signature over link_accept/);
});

test('an attach the device never asked for is refused', async () => {
  const bridge = new FakeBridge();
  const { link, got } = await connect(bridge);
  bridge.ws.conn.reply('nobody', { kind: 'accepted' }, { session_id: 's-x', attach_nonce: c.b64url(new Uint8Array(16)) });
  await sleep(10);
  assert.equal(link.rejected, 1, got.rejects.join('\n'));
  link.close();
});

test('on a relay, a control naming a session waits for its resume token', async () => {
  const bridge = new FakeBridge({ direct: false });
  const { link } = await connect(bridge);
  await link.request({ type: 'session_request', agent: 'echo', cwd: '/tmp' });
  const before = bridge.controls.length;
  const pending = link.request({ type: 'user_message', session_id: 's-1', text: 'hi' });
  await sleep(250);
  assert.equal(bridge.controls.length, before, 'held until the token arrives');
  bridge.grantToken('s-1');
  await pending;
  const sent = bridge.controls[bridge.controls.length - 1];
  assert.equal(sent.session_id, 's-1');
  assert.equal(sent._token, 'tok-s-1');
  assert.ok(TOKEN_WAIT_MS <= 5000);
  link.close();
});

test('on the LAN, nothing waits for a token and none is sent', async () => {
  const bridge = new FakeBridge({ direct: true });
  const { link } = await connect(bridge);
  await link.request({ type: 'session_request', agent: 'echo', cwd: '/tmp' });
  await link.request({ type: 'user_message', session_id: 's-1', text: 'hi' });
  const sent = bridge.controls[bridge.controls.length - 1];
  assert.equal(sent.session_id, 's-1');
  assert.equal(sent._token, undefined);
  link.close();
});

test('a resume re-keys the session: blocks sealed under the old attachment no longer open', async () => {
  const bridge = new FakeBridge();
  const { link, got } = await connect(bridge);
  await link.request({ type: 'session_request', agent: 'echo', cwd: '/tmp' });
  const old = block(bridge, 's-1', { type: 'text', seq: 1, ts: 1, id: 'a', text: 'a', done: true });
  await link.request({ type: 'session_resume', session_id: 's-1', since_seq: 0 });
  deliver(bridge, old);
  assert.equal(got.blocks.length, 0);
  assert.equal(link.rejected, 1);
  deliver(bridge, block(bridge, 's-1', { type: 'text', seq: 1, ts: 1, id: 'a', text: 'a', done: true }));
  assert.equal(got.blocks.length, 1);
  link.close();
});
