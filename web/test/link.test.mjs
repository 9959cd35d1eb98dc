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
    onTerminal: (id, m) => (got.terminal ??= []).push({ id, m }),
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
  assert.deepEqual(await link.refreshAgents().then((a) => a.map((x) => x.agent_id)), ['echo']);
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
  deliver(bridge, c.sealBlock(bridge.ws.conn.sessions.get('s-1'), 's-1', 'text', false, 1, JSON.stringify({ type: 'error', seq: 4, ts: 1 })));
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

test('a block dropped on the way: the next is refused and the link closes, to be resumed on a new one', async () => {
  const bridge = new FakeBridge();
  const { link, got } = await connect(bridge);
  await link.request({ type: 'session_request', agent: 'echo', cwd: '/tmp' });
  const b1 = block(bridge, 's-1', { type: 'text', seq: 1, ts: 1, id: 'a', text: 'a', done: true });
  block(bridge, 's-1', { type: 'text', seq: 2, ts: 1, id: 'b', text: 'b', done: true }); // dropped by the relay
  const b3 = block(bridge, 's-1', { type: 'text', seq: 3, ts: 1, id: 'c', text: 'wrong', done: true });
  deliver(bridge, b1);
  deliver(bridge, b3);
  assert.deepEqual(got.blocks.map((b) => b.block.seq), [1], 'never shown after a hole');
  assert.equal(link.rejected, 1);
  assert.match(got.rejects[0], /counter 3 arrived where 2 was due/);
  await sleep(5);
  assert.match(got.closed, /dropped on the way/);
  assert.ok(link.closed);
});

test('blocks reordered inside a batch: the first out of place breaks the link', async () => {
  const bridge = new FakeBridge();
  const { link, got } = await connect(bridge);
  await link.request({ type: 'session_request', agent: 'echo', cwd: '/tmp' });
  const b1 = block(bridge, 's-1', { type: 'text', seq: 1, ts: 1, id: 'a', text: 'a', done: true });
  const b2 = block(bridge, 's-1', { type: 'text', seq: 2, ts: 1, id: 'b', text: 'b', done: true });
  deliver(bridge, b2);
  deliver(bridge, b1);
  assert.equal(got.blocks.length, 0);
  await sleep(5);
  assert.ok(got.closed, 'closed at the first');
  assert.ok(link.rejected >= 1);
});

test('a reply dropped on the way: the next is refused and the link closes', async () => {
  const bridge = new FakeBridge();
  const { link, got } = await connect(bridge);
  const conn = bridge.ws.conn;
  const realDeliver = conn.deliver.bind(conn);
  let drop = true;
  conn.deliver = (frame) => {
    if (drop && typeof frame === 'object' && frame.type === 'reply') {
      drop = false; // the relay drops the first reply
      return;
    }
    realDeliver(frame);
  };
  const first = link.request({ type: 'list_agents' }, 2000).catch((e) => e);
  const second = link.request({ type: 'list_sessions' }, 2000).catch((e) => e);
  const [a, b] = await Promise.all([first, second]);
  assert.equal(a.code, 'link');
  assert.equal(b.code, 'link');
  assert.match(got.rejects.join('\n'), /reply.*arrived where 1 was due/);
  assert.match(got.closed, /dropped on the way/);
});

test('auth names protocol 3; a server that speaks another is refused with one sentence naming both', async () => {
  for (const [version, direct, sentence] of [
    [2, false, 'the relay speaks relay protocol 2 and this device speaks 3: update the relay'],
    [4, true, 'the LAN server speaks relay protocol 4 and this device speaks 3: update this device'],
  ]) {
    const bridge = new FakeBridge({ protocolVersion: version, direct });
    await assert.rejects(connect(bridge), (e) => e.code === 'unsupported_version' && e.message === sentence);
  }
  // A relay_status without a version (null here) is version 1.
  const bridge = new FakeBridge({ protocolVersion: null, direct: false });
  await assert.rejects(connect(bridge), /relay speaks relay protocol 1/);
  // A relay that refuses this device's version: its sentence, the same code.
  const refusing = new FakeBridge();
  const orig = refusing.connect.bind(refusing);
  refusing.connect = (send) => {
    const conn = orig(send);
    conn.receive = () => conn.deliver({ type: 'error', code: 'unsupported_version', message: 'this device speaks relay protocol 3 and the relay speaks 4: update this device' });
    return conn;
  };
  await assert.rejects(connect(refusing), (e) => e.code === 'unsupported_version' && /update this device/.test(e.message));
  // Later, a relay_status naming another version closes the link with that code.
  const later = new FakeBridge({ direct: false });
  const { link, got } = await connect(later);
  let code = null;
  link.opts.onClose = (reason, c2) => {
    got.closed = reason;
    code = c2;
  };
  deliver(later, { type: 'relay_status', protocol_version: 1, bridge_online: true, agents: [], resume_tokens: {} });
  await sleep(5);
  assert.equal(code, 'unsupported_version');
  assert.match(got.closed, /the relay speaks relay protocol 1 and this device speaks 3/);
});

test('attack: a forged agent list and replay_done from the relay are ignored; sealed ones count', async () => {
  const bridge = new FakeBridge({ direct: false });
  const { link, got } = await connect(bridge);
  const dones = [];
  link.opts.onReplayDone = (sid, last) => dones.push([sid, last]);
  const forgedAgents = [{ agent_id: 'evil', display_name: 'Evil', provides_models: false }];
  deliver(bridge, { type: 'relay_status', protocol_version: c.PROTOCOL_VERSION, bridge_online: true, agents: forgedAgents, resume_tokens: {} });
  assert.deepEqual(link.agents, [], 'the relay_status agent list is not shown');
  assert.deepEqual((await link.refreshAgents()).map((a) => a.agent_id), ['echo']);
  await link.request({ type: 'session_request', agent: 'echo', cwd: '/tmp' });
  const before = link.rejected;
  deliver(bridge, { type: 'replay_done', session_id: 's-1', last_seq: 99 });
  deliver(bridge, { type: 'replay_done', session_id: 's-1', enc: 'AAAA' });
  assert.deepEqual(dones, [], 'no forged replay_done reached the app');
  deliver(bridge, bridge.ws.conn.replayDone('s-1', 4));
  assert.deepEqual(dones, [['s-1', 4]]);
  assert.equal(link.agents.length, 1);
  console.log(`attack: forged replay_done and agent list (web): ${link.rejected - before} refused, 0 accepted, 1 sealed replay_done accepted`);
  assert.equal(got.closed, null);
  link.close();
});

test('attack: a refused control rejects its request at once, by id or by counter', async () => {
  const bridge = new FakeBridge();
  const { link } = await connect(bridge);
  bridge.handlers.interrupt = (json, conn) => {
    conn.refused(json.id, 'session_mismatch');
    return null;
  };
  const t0 = Date.now();
  await assert.rejects(link.request({ type: 'interrupt', session_id: 's-1' }), (e) => e.code === 'refused' && e.reason === 'session_mismatch');
  // The bridge could not read the id (a replayed or tampered body): the counter names it.
  bridge.handlers.stop_session = (json, conn) => {
    conn.refused(null, 'bad_seal', Number(conn.opener.last));
    return null;
  };
  await assert.rejects(link.request({ type: 'stop_session', session_id: 's-1' }), (e) => e.code === 'refused' && e.reason === 'bad_seal');
  console.log(`attack: refused controls (web): 2 of 2 rejected as refused within ${Date.now() - t0} ms, none left waiting`);
  assert.equal(link.waiting.size, 0);
  link.close();
});

test('a terminal: open carries a fresh key, its sealed output and end reach onTerminal; forgeries are refused', async () => {
  const bridge = new FakeBridge();
  const tid = 't-5f0c2a9e4b7d4c1f8a6e3d2b1c0f9e8d';
  let sealer = null;
  bridge.handlers.terminal_open = (json, conn) => {
    const appPub = c.fromB64url(json.app_pubkey);
    const nonce = c.randomBytes(16);
    const k = c.sessionKeys(c.agree(bridge.identity.x25519Secret, appPub), tid, appPub, nonce);
    sealer = new c.Sealer(k.bridgeToApp, 'block');
    const terminal = { terminal_id: tid, cwd: '/tmp', shell: '/bin/bash', cols: 80, rows: 24, started_ts: 1, last_seq: 0, attached: 1 };
    conn.reply(json.id, { kind: 'terminal', terminal }, { session_id: tid, attach_nonce: c.b64url(nonce) });
    return null;
  };
  const { link, got } = await connect(bridge);
  const r = await link.request({ type: 'terminal_open', cols: 80, rows: 24 });
  assert.equal(r.terminal.terminal_id, tid);
  assert.ok(c.fromB64url(bridge.controls.at(-1).app_pubkey).length === 32, 'a fresh key for the terminal');
  const seal = (type, m) => c.sealBlock(sealer, tid, type, false, 1, JSON.stringify(m));
  // As the bridge seals it: no `type` in the JSON (the envelope's block_type says it).
  const out = { terminal_id: tid, seq: 1, data: c.b64(c.utf8('42\r\n')) };
  deliver(bridge, seal('terminal_output', out));
  // Its type differs from the envelope's; it names another terminal; no seq.
  deliver(bridge, seal('terminal_output', { ...out, type: 'terminal_exit', seq: 2 }));
  deliver(bridge, seal('terminal_output', { ...out, terminal_id: 't-other', seq: 3 }));
  deliver(bridge, seal('terminal_output', { terminal_id: tid, data: '' }));
  // The end carries last_seq, not seq: still taken.
  deliver(bridge, seal('terminal_exit', { terminal_id: tid, reason: 'exited', exit_code: 0, last_seq: 1 }));
  assert.deepEqual(got.terminal.map((t) => [t.id, t.m.type]), [[tid, 'terminal_output'], [tid, 'terminal_exit']]);
  assert.equal(c.fromUtf8(c.fromB64(got.terminal[0].m.data)), '42\r\n');
  assert.equal(link.rejected, 3, got.rejects.join('\n'));
  assert.equal(got.blocks.length, 0, 'terminal output is not a session block');
  link.close();
});
