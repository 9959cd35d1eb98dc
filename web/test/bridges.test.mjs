// The store's record of several bridges (web/src/bridges.js): adding, the migration
// from the single-bridge layout, forgetting one, the limit. Run: node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Store } from '../src/store.js';
import * as c from '../src/crypto.js';
import { loadBridges, addBridge, forgetBridge, renameBridge, pairedBridges, displayName, MAX_BRIDGES, BridgeLimitError } from '../src/bridges.js';

function record(extra = {}) {
  const id = c.generateIdentity();
  return { bridgeId: c.bridgeIdOf(id.ed25519Public), keys: c.publicKeysWire(id), relay: 'ws://127.0.0.1:1/v1/bridge', lan: null, pairedAt: 1, ...extra };
}

async function memoryStore() {
  const s = await Store.open(); // no IndexedDB under node: the in-memory map
  assert.equal(s.persistent, false);
  return s;
}

test('a second pairing adds a bridge and makes it active, the first stays', async () => {
  const store = await memoryStore();
  const a = record();
  const b = record();
  await addBridge(store, a);
  await addBridge(store, b);
  const { bridges, active } = await loadBridges(store);
  assert.deepEqual(bridges.map((x) => x.bridgeId), [a.bridgeId, b.bridgeId]);
  assert.equal(active, b.bridgeId);
});

test('pairing again with a known bridge updates its record and keeps its local name', async () => {
  const store = await memoryStore();
  const a = record();
  await addBridge(store, a);
  await renameBridge(store, a.bridgeId, '  laptop  ');
  await addBridge(store, { ...a, pairedAt: 2 });
  const { bridges } = await loadBridges(store);
  assert.equal(bridges.length, 1);
  assert.equal(bridges[0].pairedAt, 2);
  assert.equal(displayName(bridges[0]), 'laptop');
  await renameBridge(store, a.bridgeId, '');
  assert.match(displayName((await loadBridges(store)).bridges[0]), /^Computer [a-z2-7]{6}$/);
});

test('the single-bridge layout is migrated: the user stays paired and keeps sessions', async () => {
  const store = await memoryStore();
  const old = record();
  await store.set('bridge', old);
  await store.set(`s:${old.bridgeId}:s-1`, { id: 's-1', blocks: [] });
  await store.set(`push:${old.bridgeId}`, '42');
  const { bridges, active } = await loadBridges(store);
  assert.deepEqual(bridges, [old]);
  assert.equal(active, old.bridgeId);
  assert.equal(await store.get('bridge'), undefined, 'the old key is gone');
  assert.deepEqual(await store.get('bridges'), [old]);
  assert.deepEqual(await store.get(`s:${old.bridgeId}:s-1`), { id: 's-1', blocks: [] });
  assert.equal(await store.get(`push:${old.bridgeId}`), '42');
  // Read again: the same, and a later pairing adds rather than replaces.
  assert.deepEqual((await loadBridges(store)).bridges, [old]);
  const next = record();
  await addBridge(store, next);
  assert.deepEqual((await loadBridges(store)).bridges.map((b) => b.bridgeId), [old.bridgeId, next.bridgeId]);
});

test('an unreadable single-bridge record migrates to no bridge rather than failing', async () => {
  const store = await memoryStore();
  await store.set('bridge', { bridgeId: 'brg_x', keys: { ed25519: 'nope' } });
  const { bridges, active } = await loadBridges(store);
  assert.deepEqual(bridges, []);
  assert.equal(active, null);
  assert.equal(await store.get('bridge'), undefined);
});

test('forgetting a bridge deletes its keys and only its keys', async () => {
  const store = await memoryStore();
  const identity = { secret: 'device' };
  await store.set('identity', identity);
  const a = record();
  const b = record();
  await addBridge(store, a);
  await addBridge(store, b);
  for (const x of [a, b]) {
    await store.set(`s:${x.bridgeId}:s-1`, { id: 's-1' });
    await store.set(`s:${x.bridgeId}:s-2`, { id: 's-2' });
    await store.set(`push:${x.bridgeId}`, '7');
  }
  const { bridges, active } = await forgetBridge(store, b.bridgeId);
  assert.deepEqual(bridges.map((x) => x.bridgeId), [a.bridgeId]);
  assert.equal(active, a.bridgeId, 'the active bridge was forgotten: another is shown');
  const keys = (await store.keys()).sort();
  assert.deepEqual(keys, ['active', 'bridges', 'identity', `push:${a.bridgeId}`, `s:${a.bridgeId}:s-1`, `s:${a.bridgeId}:s-2`].sort());
  assert.deepEqual(await store.get('identity'), identity);
  assert.deepEqual((await loadBridges(store)).bridges.map((x) => x.bridgeId), [a.bridgeId]);
  await forgetBridge(store, a.bridgeId);
  assert.deepEqual(await loadBridges(store), { bridges: [], active: null });
});

test(`at most ${MAX_BRIDGES} bridges: one more is refused, the others untouched`, async () => {
  const store = await memoryStore();
  const ids = [];
  for (let i = 0; i < MAX_BRIDGES; i++) {
    const r = record();
    ids.push(r.bridgeId);
    await addBridge(store, r);
  }
  await assert.rejects(addBridge(store, record()), BridgeLimitError);
  const { bridges, active } = await loadBridges(store);
  assert.deepEqual(bridges.map((b) => b.bridgeId), ids);
  assert.equal(active, ids.at(-1));
});

test('pairedBridges lists each bridge with its public keys as on the wire', async () => {
  const store = await memoryStore();
  const a = record();
  await addBridge(store, a);
  const list = await pairedBridges(store);
  assert.equal(list.length, 1);
  assert.equal(list[0].bridgeId, a.bridgeId);
  assert.deepEqual(list[0].keys, a.keys);
  assert.deepEqual(c.publicKeysFromWire(list[0].keys).ed25519, c.publicKeysFromWire(a.keys).ed25519);
});

test('the URL names a session on a bridge; a pairing fragment is not a route', async () => {
  const { routeFromUrl, routeHash } = await import('../src/route.js');
  const hash = routeHash('brg_abc', 's-01 x');
  assert.equal(hash, '#b=brg_abc&s=s-01%20x');
  assert.deepEqual(routeFromUrl(hash), { bridgeId: 'brg_abc', sessionId: 's-01 x', terminalId: null });
  assert.deepEqual(routeFromUrl('#b=brg_abc'), { bridgeId: 'brg_abc', sessionId: null, terminalId: null });
  // A terminal view: a reload reattaches to it.
  assert.deepEqual(routeFromUrl('#b=brg_abc&t=t-5f0c'), { bridgeId: 'brg_abc', sessionId: null, terminalId: 't-5f0c' });
  assert.equal(routeFromUrl('#v=1&b=brg_abc&s=secret'), null);
  assert.equal(routeFromUrl(''), null);
  assert.equal(routeHash('brg_abc', null), '');
});
