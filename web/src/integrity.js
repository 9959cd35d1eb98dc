// The page's side of the service worker (web/src/sw/): registered only in a secure
// context (https, or 127.0.0.1/localhost); the paired bridges' signing keys written
// to the worker's own IndexedDB (`terminull-sw-pins`); the worker's verdict on the
// code the server offers shown as a banner (refused, or a signed update ready); and,
// on a plain-http page, one quiet line saying why there is no offline copy or pin.

import { app } from './state.js';
import { h, clear } from './dom.js';
import { getState, setBridges } from './sw/pins-db.js';

/** The paired bridges' `{bridgeId, ed25519}` from whatever the page holds (one bridge, or several). */
function pairedBridges() {
  const found = new Map();
  const add = (entry) => {
    // A bridge's record, or the page's context for it (which holds the record).
    const b = entry?.bridge ?? entry;
    if (b && typeof b.bridgeId === 'string' && typeof b.keys?.ed25519 === 'string') {
      found.set(b.bridgeId, { bridgeId: b.bridgeId, ed25519: b.keys.ed25519 });
    }
  };
  const many = app.bridges;
  if (many instanceof Map) for (const b of many.values()) add(b);
  else if (Array.isArray(many)) many.forEach(add);
  else if (many && typeof many === 'object') Object.values(many).forEach(add);
  add(app.bridge);
  return [...found.values()];
}

/** Writes the paired bridges' keys where the worker reads them. Call after pairing or forgetting a bridge. */
export async function syncPins() {
  if (!window.isSecureContext || !globalThis.indexedDB) return;
  try {
    await setBridges(pairedBridges());
  } catch (e) {
    console.warn(`pins: ${e.message ?? e}`);
  }
}

function shortDigest(hex) {
  return typeof hex === 'string' ? hex.slice(0, 12) : '?';
}

function showStatus(status) {
  const banner = app.ui.integrity;
  if (!banner) return;
  clear(banner);
  banner.dataset.state = status?.state ?? '';
  if (status?.state === 'refused') {
    const since = status.since ? new Date(status.since).toLocaleString() : 'earlier';
    banner.append(
      h('strong', null, 'This server sent app code none of your computers signed. '),
      `It was not loaded: the app keeps running the version pinned ${since}. `,
      h('span', { class: 'small' }, `Offered ${shortDigest(status.offered)}…, pinned ${shortDigest(status.digest)}… (${status.reason ?? 'no reason given'})`),
    );
    banner.hidden = false;
  } else if (status?.state === 'updated' /* after this page loaded: it runs the previous code */ && status.signedBy && status.at > performance.timeOrigin) {
    banner.append(
      `An update signed by your computer (${status.signedBy}) is ready. `,
      h('button', { type: 'button', class: 'link-btn', onclick: () => location.reload() }, 'Reload'),
    );
    banner.hidden = false;
  } else {
    banner.hidden = true;
  }
}

/** Starts the worker (secure contexts) or says why there is none; writes the pins; shows the last verdict. */
export async function startIntegrity() {
  const ui = app.ui;
  ui.integrity = h('div', { class: 'integrity-banner', testid: 'integrity-banner', role: 'status', hidden: true });
  ui.appNote = h('p', { class: 'app-note', testid: 'app-note' });
  const main = document.querySelector('#app main');
  main?.before(ui.integrity);
  main?.after(ui.appNote);
  if (!window.isSecureContext || !('serviceWorker' in navigator)) {
    ui.appNote.textContent =
      'No offline copy, install or code pinning here: they need https (the relay) or this computer’s own 127.0.0.1, and this page is plain http.';
    return;
  }
  ui.appNote.hidden = true;
  await syncPins();
  navigator.serviceWorker.addEventListener('message', (event) => {
    if (event.data?.type === 'terminull-shell') showStatus(event.data.status);
  });
  try {
    await navigator.serviceWorker.register('/sw.js', { scope: '/' });
  } catch (e) {
    ui.appNote.textContent = `The offline worker could not start: ${e.message ?? e}`;
    ui.appNote.hidden = false;
    return;
  }
  try {
    showStatus(await getState('status'));
  } catch {
    /* no verdict yet */
  }
}
