// Pairing this phone with a bridge from the QR link (opened as the page's URL, or
// pasted): the request signed with the device identity, the bridge's answer checked,
// the bridge kept in IndexedDB, and the short code shown to compare with the computer's.

import * as c from './crypto.js';
import { app } from './state.js';
import { h, clear } from './dom.js';
import { showView } from './views.js';
import { showHome } from './lists.js';
import { connect } from './connection.js';
import { syncPins } from './integrity.js';

export function pairingFragment() {
  const f = location.hash.slice(1);
  return /(^|&)v=/.test(f) && /(^|&)s=/.test(f) ? f : null;
}

function clearFragment() {
  history.replaceState(null, '', '/');
}

function deviceName() {
  const ua = navigator.userAgent || '';
  const m = /(iPhone|iPad|Android|Windows|Macintosh|Linux)/.exec(ua);
  return `Web app${m ? ` (${m[1]})` : ''}`;
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
      throw new Error(`the bridge refused (${res.status}): ${why}`);
    }
    const paired = c.finishPairing(pending, body);
    app.bridge = {
      bridgeId: paired.bridgeId,
      keys: paired.keys,
      relay: paired.relay,
      lan: paired.lan,
      shortCode: paired.shortCode,
      pairedAt: Math.floor(Date.now() / 1000),
    };
    await app.store.set('bridge', app.bridge);
    await syncPins();
    app.shortCode = paired.shortCode;
    showBanner();
    showHome();
    connect();
  } catch (e) {
    ui.pairMsg.textContent = `Pairing failed: ${e.message ?? e}`;
  }
}

function showBanner() {
  const ui = app.ui;
  clear(ui.banner);
  if (!app.shortCode) {
    ui.banner.hidden = true;
    return;
  }
  ui.banner.hidden = false;
  ui.banner.append(
    h('div', null, 'Paired. Check that your computer shows the same code, and confirm it there:'),
    h('div', { class: 'short-code', testid: 'short-code' }, app.shortCode),
    h('div', { class: 'small' }, `Bridge ${app.bridge?.bridgeId ?? ''}. If the codes differ, revoke this device on the computer.`),
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
