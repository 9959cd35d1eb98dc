// Taking a pairing from the bridge's LAN page to its relay's page (docs/web-client.md,
// "One pairing, both paths"): the two are different origins, so each has its own
// store, and the relay's page is the one that installs, keeps an offline copy and
// gets notifications away from home. The LAN page offers a link to the relay's page
// whose fragment carries this device's identity and the bridge's record; the relay's
// page takes them in before anything else and clears the fragment. A fragment never
// reaches a server (the relay serves the code that reads it, as it does for a pairing
// made through it). The same device then reaches the bridge through the relay: no
// second pairing, no second entry in the bridge's devices.

import * as c from './crypto.js';
import { addBridge, loadBridges } from './bridges.js';

const PREFIX = '#carry=';
/** The most a carried fragment may hold (an identity and one record are about 1 KB). */
const MAX_CARRY_CHARS = 8192;

/** The relay's page for a pairing's relay (`ws[s]://host` → `http[s]://host`), or null. */
export function relayPage(bridge) {
  try {
    if (typeof bridge?.relay !== 'string') return null;
    const u = new URL(bridge.relay);
    if (u.protocol !== 'ws:' && u.protocol !== 'wss:') return null;
    return `${u.protocol === 'wss:' ? 'https:' : 'http:'}//${u.host}`;
  } catch {
    return null;
  }
}

/** The link that opens `bridge`'s relay page with this device's pairing, or null. */
export function carryLink(identity, bridge) {
  const page = relayPage(bridge);
  if (!page || !identity) return null;
  const { bridgeId, keys, relay, lan, pairedAt, name } = bridge;
  const carried = { v: 1, identity: c.identitySecrets(identity), bridge: { bridgeId, keys, relay, lan, pairedAt, name } };
  return `${page}/${PREFIX}${c.b64url(new TextEncoder().encode(JSON.stringify(carried)))}`;
}

/** The carried pairing in `hash`, or null when there is none; throws when it is unreadable. */
export function parseCarried(hash) {
  if (typeof hash !== 'string' || !hash.startsWith(PREFIX)) return null;
  const text = hash.slice(PREFIX.length);
  if (text.length > MAX_CARRY_CHARS) throw new Error('the carried pairing is too long');
  const value = JSON.parse(new TextDecoder().decode(c.fromB64url(text)));
  if (value?.v !== 1 || typeof value.bridge?.bridgeId !== 'string') throw new Error('not a carried pairing');
  return { identity: c.identityFromSecrets(value.identity), secrets: value.identity, bridge: value.bridge };
}

/**
 * Takes a carried pairing from this page's URL, if it has one: into an empty store
 * (identity and bridge), or beside the bridges of the same identity. A store that
 * already holds another identity's pairings keeps them (taking the carried identity
 * would cut those off): the page says to pair there instead. Returns what the page
 * should say, or null when nothing was carried.
 */
export async function takeCarried(store, identity) {
  let carried;
  try {
    carried = parseCarried(location.hash);
  } catch (e) {
    history.replaceState(null, '', location.pathname + location.search);
    return { ok: false, message: `The link from the LAN page is not readable (${e.message ?? e}).` };
  }
  if (!carried) return null;
  // The secrets leave the address bar (and this entry of the history) at once.
  history.replaceState(null, '', location.pathname + location.search);
  const { bridges } = await loadBridges(store);
  const same = identity && c.deviceIdOf(identity.ed25519Public) === c.deviceIdOf(carried.identity.ed25519Public);
  if (bridges.length && !same) {
    return { ok: false, message: 'This app is already paired as another device. Pair this computer here: run `terminull pair` and scan its code.' };
  }
  if (!same) await store.set('identity', carried.secrets);
  await addBridge(store, { ...carried.bridge, carriedAt: Math.floor(Date.now() / 1000) });
  return { ok: true, identity: carried.identity, message: null };
}
