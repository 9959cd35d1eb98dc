// Pairing this phone with a bridge from the QR link (opened as the page's URL, or
// pasted): the request signed with the device identity, the bridge's answer checked,
// the bridge added to the ones kept in IndexedDB (bridges.js: a second pairing adds
// a bridge, never replaces one) and shown, and the short code shown to compare with
// the computer's.

import * as c from './crypto.js';
import { app, BridgeCtx } from './state.js';
import { h, clear } from './dom.js';
import { showView } from './views.js';
import { showHome } from './lists.js';
import { connect, markReachable } from './connection.js';
import { addBridge, BridgeLimitError, MAX_BRIDGES, displayName } from './bridges.js';
import { activate } from './switcher.js';
import { syncPins } from './integrity.js';

export function pairingFragment() {
  const f = location.hash.slice(1);
  return /(^|&)v=/.test(f) && /(^|&)s=/.test(f) ? f : null;
}

function clearFragment() {
  history.replaceState(null, '', '/');
}

/** The name this device pairs as, from its user agent; the most specific platform wins (an Android phone's says "Linux" too). */
export function deviceName(ua = navigator.userAgent || '') {
  const platform = ['iPhone', 'iPad', 'Android', 'Windows', 'Macintosh', 'Linux'].find((p) => ua.includes(p));
  return `Web app${platform ? ` (${platform})` : ''}`;
}

/** Why a pairing failed, in words that say what to do. */
export function pairingFailure(status, why) {
  if (status === 403 && /no open pairing offer/.test(why)) {
    return 'This pairing link was used already or has been replaced. Run `terminull pair` on the computer again and scan the new code.';
  }
  return `the bridge refused (${status}): ${why}`;
}

export async function pairWith(linkText) {
  showView('pair');
  const ui = app.ui;
  ui.pairMsg.textContent = 'Pairing…';
  let link;
  try {
    link = c.parsePairingLink(linkText);
  } catch (e) {
    clearFragment();
    ui.pairMsg.textContent = `This pairing link is not valid: ${e.message}`;
    return;
  }
  clearFragment();
  if (link.expiresAt < Date.now() / 1000) {
    ui.pairMsg.textContent = 'This pairing link has expired. Run `terminull pair` again and scan the new code.';
    return;
  }
  if (app.bridges.size >= MAX_BRIDGES && !app.bridges.has(link.bridgeId)) {
    ui.pairMsg.textContent = new BridgeLimitError().message;
    return;
  }
  try {
    const { request, pending } = c.pairRequest(link, app.identity, deviceName());
    const res = await fetch(`${location.origin}/v1/bridges/${encodeURIComponent(link.bridgeId)}/pair`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(request),
      cache: 'no-store',
    });
    const text = await res.text();
    let body = null;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    if (res.status !== 200) {
      const why = body && typeof body.error === 'string' ? body.error : text.slice(0, 200);
      throw new Error(pairingFailure(res.status, why));
    }
    const paired = c.finishPairing(pending, body);
    const record = {
      bridgeId: paired.bridgeId,
      keys: paired.keys,
      relay: paired.relay,
      lan: paired.lan,
      shortCode: paired.shortCode,
      pairedAt: Math.floor(Date.now() / 1000),
    };
    const stored = (await addBridge(app.store, record)).find((b) => b.bridgeId === record.bridgeId) ?? record;
    let ctx = app.bridges.get(record.bridgeId);
    if (ctx) {
      // Paired again: the new record (keys) is used from the next link on.
      ctx.bridge = stored;
      ctx.link?.close('paired again');
    } else {
      ctx = new BridgeCtx(stored);
      app.bridges.set(record.bridgeId, ctx);
    }
    if (app.serverKind) markReachable();
    await syncPins();
    app.shortCode = paired.shortCode;
    app.shortCodeBridge = record.bridgeId;
    activate(record.bridgeId, false);
    showBanner();
    showHome();
    connect(ctx);
  } catch (e) {
    ui.pairMsg.textContent = `Pairing failed: ${e.message ?? e}`;
  }
}

/** The short code of the latest pairing, shown while its bridge is the one shown. */
export function showBanner() {
  const ui = app.ui;
  clear(ui.banner);
  if (!app.shortCode || app.shortCodeBridge !== app.activeId) {
    ui.banner.hidden = true;
    return;
  }
  ui.banner.hidden = false;
  ui.banner.append(
    h('div', null, 'Paired. Check that your computer shows the same code, and confirm it there:'),
    h('div', { class: 'short-code', testid: 'short-code' }, app.shortCode),
    h('div', { class: 'small' }, `${app.bridge ? displayName(app.bridge) : 'Bridge'} (${app.bridge?.bridgeId ?? ''}). If the codes differ, revoke this device on the computer.`),
    h(
      'button',
      {
        type: 'button',
        class: 'link-btn',
        onclick: () => {
          app.shortCode = null;
          showBanner();
        },
      },
      'Dismiss',
    ),
  );
}
