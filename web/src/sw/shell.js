// The service worker's app shell: it precaches the shell (web/src/sw/integrity.js
// lists it), serves it from the pinned copy (so an offline load shows the app, which
// then says "reconnecting"), and pins the code: after the first load, a shell whose
// digest differs from the pinned one is taken only when a paired bridge signed that
// digest (GET /v1/bridges/{id}/app-signature); otherwise the pinned copy keeps being
// served and the page is told why (docs/web-client.md#app-code-integrity).

import * as c from '../crypto.js';
import { SHELL_PATHS, shellDigest, checkSignature } from './integrity.js';
import { getState, setState, listBridges } from './pins-db.js';

/** Request path → the shell file served for it. */
const SERVED = new Map(SHELL_PATHS.filter((p) => p !== '/sw.js').map((p) => [p, p]));
SERVED.set('/pair', '/');
SERVED.set('/index.html', '/');

/** The largest shell file taken (the bundle is about 100 KB; a hostile server's 1 GB is not read whole). */
const MAX_FILE_BYTES = 4 * 1024 * 1024;

async function fetchFile(path) {
  const res = await fetch(path, { cache: 'no-store', credentials: 'same-origin', redirect: 'error' });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (bytes.length > MAX_FILE_BYTES) throw new Error(`${path}: ${bytes.length} bytes, more than ${MAX_FILE_BYTES}`);
  return { bytes, headers: res.headers };
}

/** The shell as the server serves it now: each file, and the digest over them. */
async function fetchShell() {
  const entries = await Promise.all(SHELL_PATHS.map(async (p) => [p, await fetchFile(p)]));
  const responses = new Map(entries);
  const files = new Map(entries.map(([p, r]) => [p, r.bytes]));
  return { responses, digest: shellDigest(files) };
}

/** Tells every page of this origin the check's outcome, and keeps it for pages loaded later. */
async function report(sw, status) {
  const stamped = { ...status, at: Date.now() };
  await setState('status', stamped);
  for (const client of await sw.clients.matchAll({ includeUncontrolled: true })) {
    client.postMessage({ type: 'terminull-shell', status: stamped });
  }
  return stamped;
}

/** Serves `shell` from now on: a cache named by its digest; the previous one is kept (a page mid-load), older ones go. */
async function pin(sw, shell, status) {
  const digest = c.hex(shell.digest);
  const name = `shell-${digest}`;
  const cache = await caches.open(name);
  for (const [path, r] of shell.responses) await cache.put(path, new Response(r.bytes, { headers: r.headers }));
  const old = await getState('pin');
  await setState('pin', { digest, cache: name, since: Date.now() });
  for (const key of await caches.keys()) {
    if (key.startsWith('shell-') && key !== name && key !== old?.cache) await caches.delete(key);
  }
  return report(sw, { ...status, digest });
}

async function fetchSignature(bridgeId) {
  const res = await fetch(`/v1/bridges/${encodeURIComponent(bridgeId)}/app-signature`, { cache: 'no-store', redirect: 'error' });
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  const text = await res.text();
  if (text.length > 4096) throw new Error('the signature is too long');
  return JSON.parse(text);
}

/** One update check: the server's shell against the pin. */
async function check(sw) {
  let shell;
  try {
    shell = await fetchShell();
  } catch (e) {
    // Offline, or the server is down: nothing to decide; the pinned copy serves.
    return (await getState('status')) ?? { state: 'offline', reason: String(e.message ?? e) };
  }
  const digest = c.hex(shell.digest);
  const current = await getState('pin');
  if (current?.digest === digest) {
    if (!(await caches.has(current.cache))) return pin(sw, shell, { state: 'current' });
    return report(sw, { state: 'current', digest });
  }
  if (!current) return pin(sw, shell, { state: 'pinned', reason: 'first load: this is the code pinned from now on' });
  const pins = await listBridges();
  if (pins.length === 0) {
    return pin(sw, shell, { state: 'updated', unsigned: true, reason: 'no computer paired yet: taken without a signature' });
  }
  const reasons = [];
  for (const p of pins) {
    let signature;
    try {
      signature = await fetchSignature(p.bridgeId);
    } catch (e) {
      reasons.push(`${p.bridgeId}: no signature (${e.message ?? e})`);
      continue;
    }
    const verdict = checkSignature(pins, signature, shell.digest);
    if (verdict.ok) return pin(sw, shell, { state: 'updated', signedBy: verdict.bridgeId });
    reasons.push(`${p.bridgeId}: ${verdict.reason}`);
  }
  return report(sw, {
    state: 'refused',
    digest: current.digest,
    offered: digest,
    since: current.since,
    reason: reasons.join('; '),
  });
}

let checking = null;

/** Runs one check at a time; callers during a check share its outcome. */
export function checkForUpdate(sw) {
  if (!checking) checking = check(sw).finally(() => (checking = null));
  return checking;
}

async function serve(path, request) {
  try {
    const current = await getState('pin');
    if (current) {
      const hit = await (await caches.open(current.cache)).match(path);
      if (hit) return hit;
    }
  } catch (e) {
    console.warn(`shell: ${e.message ?? e}`);
  }
  return fetch(request);
}

/** Wires the worker's events. */
export function installShell(sw) {
  sw.addEventListener('install', (event) => {
    event.waitUntil(checkForUpdate(sw).catch((e) => console.warn(`shell: ${e.message ?? e}`)));
    sw.skipWaiting();
  });
  sw.addEventListener('activate', (event) => event.waitUntil(sw.clients.claim()));
  sw.addEventListener('fetch', (event) => {
    const request = event.request;
    if (request.method !== 'GET') return;
    const url = new URL(request.url);
    if (url.origin !== sw.location.origin) return;
    const path = SERVED.get(url.pathname);
    if (!path) return;
    event.respondWith(serve(path, request));
    if (request.mode === 'navigate') event.waitUntil(checkForUpdate(sw).catch(() => {}));
  });
  sw.addEventListener('message', (event) => {
    if (event.data?.type !== 'check') return;
    event.waitUntil(
      checkForUpdate(sw)
        .catch((e) => ({ state: 'error', reason: String(e.message ?? e) }))
        .then((status) => event.source?.postMessage({ type: 'terminull-shell', status })),
    );
  });
}
