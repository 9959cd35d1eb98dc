// The bridges this page is paired with, as kept in the store (docs/web-client.md,
// "Several bridges"): one record per bridge under `bridges` (oldest pairing first),
// the one shown under `active`, each bridge's sessions under `s:<bridge>:<session>`
// and its push counter under `push:<bridge>`. Pairing again with a known bridge
// updates its record; a new one is added, up to MAX_BRIDGES. Forgetting a bridge
// deletes its record and every key of its own, and nothing else.
//
// The layout before several bridges kept the one bridge under `bridge`: it is moved
// into `bridges` the first time the store is read (its sessions' keys already named
// the bridge, so they stay as they are).

import { publicKeysFromWire } from './crypto.js';

/** The most bridges one page pairs with (and so the most links it keeps open). */
export const MAX_BRIDGES = 8;
/** The longest local name of a bridge, in characters. */
export const MAX_NAME = 40;

const BRIDGES_KEY = 'bridges';
const ACTIVE_KEY = 'active';
/** The key of the single bridge before several bridges (migrated, then deleted). */
const LEGACY_KEY = 'bridge';

export class BridgeLimitError extends Error {
  constructor() {
    super(`this page is already paired with ${MAX_BRIDGES} computers, the most it holds; forget one first`);
    this.code = 'bridge_limit';
  }
}

/** Whether `r` is a bridge record this app can use (an id and public keys that parse). */
function usable(r) {
  if (!r || typeof r !== 'object' || typeof r.bridgeId !== 'string' || !r.bridgeId) return false;
  try {
    publicKeysFromWire(r.keys);
    return true;
  } catch {
    return false;
  }
}

/**
 * The paired bridges and the active one's id, migrating the single-bridge layout.
 * Records that cannot be used (unparsable keys) are left out, with a warning.
 */
export async function loadBridges(store) {
  let list = await store.get(BRIDGES_KEY);
  let active = (await store.get(ACTIVE_KEY)) ?? null;
  if (!Array.isArray(list)) {
    list = [];
    const legacy = await store.get(LEGACY_KEY);
    if (legacy != null) {
      if (usable(legacy)) {
        list = [legacy];
        active = legacy.bridgeId;
      }
      await store.set(BRIDGES_KEY, list);
      await store.set(ACTIVE_KEY, active);
      await store.delete(LEGACY_KEY);
    }
  }
  const bridges = [];
  for (const r of list) {
    if (!usable(r)) {
      console.warn('a stored bridge record is unreadable; left out');
      continue;
    }
    if (bridges.some((b) => b.bridgeId === r.bridgeId) || bridges.length >= MAX_BRIDGES) continue;
    bridges.push(r);
  }
  if (!bridges.some((b) => b.bridgeId === active)) active = bridges[0]?.bridgeId ?? null;
  return { bridges, active };
}

/**
 * Keeps a bridge just paired and makes it the active one: a known bridge's record is
 * updated (its local name kept), a new one added. Throws BridgeLimitError when the
 * page holds MAX_BRIDGES others.
 */
export async function addBridge(store, record) {
  if (!usable(record)) throw new Error('the bridge record has no usable id or keys');
  const { bridges } = await loadBridges(store);
  const i = bridges.findIndex((b) => b.bridgeId === record.bridgeId);
  if (i >= 0) bridges[i] = { ...record, name: record.name ?? bridges[i].name };
  else if (bridges.length >= MAX_BRIDGES) throw new BridgeLimitError();
  else bridges.push(record);
  await store.set(BRIDGES_KEY, bridges);
  await store.set(ACTIVE_KEY, record.bridgeId);
  return bridges;
}

/** Forgets a bridge: its record, its sessions and its push counter; the others stay. */
export async function forgetBridge(store, bridgeId) {
  const { bridges, active } = await loadBridges(store);
  const left = bridges.filter((b) => b.bridgeId !== bridgeId);
  await store.set(BRIDGES_KEY, left);
  const nextActive = active === bridgeId ? (left[0]?.bridgeId ?? null) : active;
  await store.set(ACTIVE_KEY, nextActive);
  const own = `s:${bridgeId}:`;
  for (const key of await store.keys()) {
    if (typeof key === 'string' && (key.startsWith(own) || key === `push:${bridgeId}`)) await store.delete(key);
  }
  return { bridges: left, active: nextActive };
}

/** Names a bridge on this page only (trimmed, at most MAX_NAME characters; empty: the default). */
export async function renameBridge(store, bridgeId, name) {
  const { bridges } = await loadBridges(store);
  const b = bridges.find((x) => x.bridgeId === bridgeId);
  if (!b) return bridges;
  const clean = String(name ?? '').trim().slice(0, MAX_NAME);
  if (clean) b.name = clean;
  else delete b.name;
  await store.set(BRIDGES_KEY, bridges);
  return bridges;
}

/** Remembers which bridge the page shows. */
export async function setActiveBridge(store, bridgeId) {
  await store.set(ACTIVE_KEY, bridgeId);
}

/**
 * The paired bridges with their public keys (for code that checks what a bridge
 * signed, e.g. the service worker's update check): `[{bridgeId, keys, name, relay, lan}]`,
 * `keys` as on the wire (`{ed25519, x25519}`, base64url).
 */
export async function pairedBridges(store) {
  const { bridges } = await loadBridges(store);
  return bridges.map((b) => ({ bridgeId: b.bridgeId, keys: b.keys, name: displayName(b), relay: b.relay ?? null, lan: b.lan ?? null }));
}

/** What the switcher calls a bridge: its local name, else a short form of its id. */
export function displayName(b) {
  if (b.name) return b.name;
  return `Computer ${shortId(b.bridgeId)}`;
}

/** The first characters of a bridge id that tell bridges apart at a glance. */
export function shortId(bridgeId) {
  const s = String(bridgeId).replace(/^brg_/, '');
  return s.slice(0, 6);
}
