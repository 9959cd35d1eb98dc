// What the header and the toast tell the user about the link: the connection state,
// the path (LAN or relay), the count of network messages refused, and short notices.

import { app } from './state.js';

let toastTimer = null;

/** A notice at the bottom of the page for four seconds. */
export function toast(text, kind = 'info') {
  const t = app.ui.toast;
  t.textContent = text;
  t.dataset.kind = kind;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (t.hidden = true), 4000);
}

export function setConn(state, label) {
  app.connState = state;
  const el = app.ui.conn;
  el.dataset.state = state;
  el.textContent = label ?? state;
  el.title = state === 'connected' ? 'End-to-end encrypted link to the bridge' : '';
}

export function setPath(kind, link = null) {
  app.serverKind = kind;
  // On the relay's page the link may run on the LAN data channel (docs/web-client.md).
  // On the bridge's LAN page it may run through the relay its pairing named.
  const direct = kind === 'relay' && link === 'lan';
  const relayed = (kind === 'lan' && link === 'relay') || (kind === 'relay' && link !== 'lan');
  app.ui.path.textContent = kind === 'lan' && !relayed ? 'LAN' : direct ? 'LAN direct' : relayed ? 'via relay' : '';
  app.ui.path.dataset.kind = kind ?? '';
  app.ui.path.dataset.link = direct ? 'lan' : relayed ? 'relay' : kind ?? '';
}

/** Counts a message from the network that failed to verify, open or render; the badge shows the count. */
export function noteRejected(reason) {
  app.rejected += 1;
  app.reasons.push(reason);
  if (app.reasons.length > 50) app.reasons.shift();
  const b = app.ui.rejected;
  b.hidden = false;
  b.textContent = `⚠ ${app.rejected}`;
  b.title = `${app.rejected} message(s) from the network refused (failed to verify or open)`;
  console.warn(reason);
}

export function showRejected() {
  toast(`${app.rejected} refused: ${app.reasons.slice(-3).join(' | ')}`, 'warn');
}
