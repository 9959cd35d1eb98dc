// The terminull phone app: pairs from the QR link, keeps an end-to-end encrypted
// link to the bridge (same origin: the bridge's LAN server or a relay), lists and
// starts sessions, renders their blocks, answers permission requests, interrupts,
// and resumes by seq after a sleep, a dropped socket or a reload.
//
// This module only starts it: the device identity and the paired bridge from
// IndexedDB, the page's lifecycle events, and the first view. Each concept has its
// own module (web/README.md lists them).

import * as c from './crypto.js';
import { Store } from './store.js';
import { h } from './dom.js';
import { app, CURRENT_KEY } from './state.js';
import { buildShell } from './shell.js';
import { showView } from './views.js';
import { pairingFragment, pairWith } from './pairing.js';
import { connect, checkLink } from './connection.js';
import { showHome } from './lists.js';
import { loadSession } from './sessions.js';
import { openSessionView } from './session-view.js';
import { installNotifications, pendingIntent, handleIntent } from './notifications.js';

async function main() {
  buildShell();
  app.store = await Store.open();
  try {
    const secrets = await app.store.get('identity');
    app.identity = secrets ? c.identityFromSecrets(secrets) : null;
  } catch (e) {
    console.warn(`the stored identity is unreadable: ${e.message}`);
  }
  if (!app.identity) {
    app.identity = c.generateIdentity();
    await app.store.set('identity', c.identitySecrets(app.identity));
  }
  app.bridge = (await app.store.get('bridge')) ?? null;
  if (app.bridge) {
    try {
      c.publicKeysFromWire(app.bridge.keys);
      app.pushLast = BigInt((await app.store.get(`push:${app.bridge.bridgeId}`)) ?? 0);
    } catch {
      app.bridge = null;
    }
  }
  window.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') checkLink();
    else for (const s of app.sessions.values()) s.flush();
  });
  window.addEventListener('pagehide', () => {
    for (const s of app.sessions.values()) s.flush();
  });
  window.addEventListener('online', () => checkLink());
  // Exposed for tests and debugging: read-only views of the state.
  window.terminull = {
    get deviceId() {
      return app.identity ? c.deviceIdOf(app.identity.ed25519Public) : null;
    },
    get bridgeId() {
      return app.bridge?.bridgeId ?? null;
    },
    get current() {
      return app.current;
    },
    get rejected() {
      return app.rejected;
    },
    seqs: (sid) => app.sessions.get(sid ?? app.current)?.transcript.seqs() ?? [],
    /** Drops the WebSocket as a network failure would (tests the reconnect and resume). */
    dropConnection: () => app.link?.ws.close(),
    flush: () => Promise.all([...app.sessions.values()].map((s) => s.flush())),
  };

  await installNotifications();
  const fragment = pairingFragment();
  if (fragment) {
    await pairWith(location.href);
    return;
  }
  if (!app.bridge) {
    showView('pair');
    app.ui.pairMsg.textContent = 'Scan the QR code that `terminull pair` shows on your computer, or paste its link.';
    return;
  }
  let current = null;
  try {
    current = sessionStorage.getItem(CURRENT_KEY);
  } catch {
    /* storage off */
  }
  if (current) {
    const s = await loadSession(current);
    s.followed = true;
    openSessionView(s);
  } else {
    showHome();
  }
  connect();
  // A notification tapped while no page was open (docs/web-client.md, "Notifications").
  const intent = await pendingIntent();
  if (new URLSearchParams(location.search).has('open')) history.replaceState(null, '', '/');
  if (intent) handleIntent(intent);
}

main().catch((e) => {
  console.error(e);
  document.body.append(h('p', { class: 'fatal' }, `The app failed to start: ${e.message ?? e}`));
});
