// The terminull phone app: pairs from the QR link, keeps an end-to-end encrypted
// link to the bridge (same origin: the bridge's LAN server or a relay), lists and
// starts sessions, renders their blocks, answers permission requests, interrupts,
// and resumes by seq after a sleep, a dropped socket or a reload.
//
// This module only starts it: the device identity and the paired bridges from
// IndexedDB (the one the URL names, else the one shown last, is shown), the page's lifecycle events, and the first view. Each concept has its
// own module (web/README.md lists them).

import * as c from './crypto.js';
import { Store } from './store.js';
import { h } from './dom.js';
import { app, BridgeCtx, CURRENT_KEY } from './state.js';
import { buildShell } from './shell.js';
import { showView } from './views.js';
import { pairingFragment, pairWith } from './pairing.js';
import { connectAll, checkLink, detectServer, markReachable, networkChanged } from './connection.js';
import { setPath, toast } from './status.js';
import { loadBridges } from './bridges.js';
import { routeFromUrl } from './route.js';
import { attentionOf } from './attention.js';
import { activate, renderSwitcher } from './switcher.js';
import { showHome } from './lists.js';
import { loadSession, attach } from './sessions.js';
import { openSessionView } from './session-view.js';
import { startIntegrity } from './integrity.js';
import { takeCarried } from './carry.js';
import { installNotifications, pendingIntent, handleIntent } from './notifications.js';
import { attachTerminal, leaveTerminal, onTerminal, reattachTerminal, terminalDebug } from './terminal-view.js';
import { refreshTerminals } from './terminal-list.js';

async function main() {
  buildShell();
  // The terminal view's hooks, for the modules that must not pull xterm.js into their graph (the Node tests import them).
  app.terminals = { onTerminal, reattach: reattachTerminal, refresh: refreshTerminals, leave: leaveTerminal };
  app.store = await Store.open();
  try {
    const secrets = await app.store.get('identity');
    app.identity = secrets ? c.identityFromSecrets(secrets) : null;
  } catch (e) {
    console.warn(`the stored identity is unreadable: ${e.message}`);
  }
  // A pairing carried here from the bridge's LAN page (web/src/carry.js): this device's
  // identity and that bridge, before anything reads the store.
  const carried = await takeCarried(app.store, app.identity);
  if (carried?.identity) app.identity = carried.identity;
  if (carried?.message) toast(carried.message, 'warn');
  if (!app.identity) {
    app.identity = c.generateIdentity();
    await app.store.set('identity', c.identitySecrets(app.identity));
  }
  const { bridges, active } = await loadBridges(app.store);
  for (const b of bridges) {
    const ctx = new BridgeCtx(b);
    try {
      ctx.pushLast = BigInt((await app.store.get(`push:${b.bridgeId}`)) ?? 0);
    } catch {
      /* an unreadable counter: start from 0 (the bridge's counters are far above) */
    }
    app.bridges.set(b.bridgeId, ctx);
  }
  app.activeId = active;
  if (app.bridges.size) {
    setPath(await detectServer());
    markReachable();
  }
  window.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') checkLink();
    else flushAll();
  });
  window.addEventListener('pagehide', () => flushAll());
  window.addEventListener('online', () => {
    checkLink();
    networkChanged();
  });
  // Exposed for tests and debugging: read-only views of the state.
  window.terminull = {
    get deviceId() {
      return app.identity ? c.deviceIdOf(app.identity.ed25519Public) : null;
    },
    get bridgeId() {
      return app.bridge?.bridgeId ?? null;
    },
    /** The paired bridges' ids, in pairing order. */
    get bridgeIds() {
      return [...app.bridges.keys()];
    },
    get current() {
      return app.current;
    },
    get rejected() {
      return app.rejected;
    },
    seqs: (sid) => app.sessions.get(sid ?? app.current)?.transcript.seqs() ?? [],
    /** Blocks received per path of the link (`lan`: the LAN data channel; `relay`: a WebSocket). */
    get pathBlocks() {
      return app.pathBlocks ?? { lan: 0, relay: 0 };
    },
    /** Drops the WebSocket as a network failure would (tests the reconnect and resume). */
    dropConnection: () => app.link?.ws.close(),
    flush: () => flushAll(),
    /** The switcher's counts of bridge `id`: `{permissions, unseen}`. */
    attention: (id) => (app.bridges.has(id) ? attentionOf(app.bridges.get(id)) : null),
    /** The terminal shown: `{id, cols, rows, text, sent, lastSeq, exited, alternate}`, or null. */
    terminal: () => terminalDebug(),
  };
  // The service worker (secure contexts only) and its pinned code's verdict; not awaited.
  startIntegrity().catch((e) => console.warn(`integrity: ${e.message ?? e}`));

  // A route (`#b=…&s=…`, e.g. from a notification) or a pairing link opened in this tab.
  window.addEventListener('hashchange', () => {
    if (pairingFragment()) pairWith(location.href).then(() => connectAll());
    else openRoute(routeFromUrl(), false);
  });
  await installNotifications();
  const fragment = pairingFragment();
  if (fragment) {
    await pairWith(location.href);
    connectAll();
    return;
  }
  renderSwitcher();
  if (!app.bridges.size) {
    showView('pair');
    app.ui.pairMsg.textContent = 'Scan the QR code that `terminull pair` shows on your computer, or paste its link.';
    return;
  }
  const route = routeFromUrl();
  if (route) {
    await openRoute(route, true);
  } else {
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
  }
  connectAll();
  // A notification tapped while no page was open (docs/web-client.md, "Notifications"):
  // the worker opened `/?open=1#b=…&s=…` (routed above) and left the intent, which
  // carries an Allow/Deny to send on that bridge's link.
  const intent = await pendingIntent();
  if (new URLSearchParams(location.search).has('open')) history.replaceState(null, '', `/${location.hash}`);
  if (intent) handleIntent(intent);
}

/** Saves every held session of every bridge now. */
function flushAll() {
  const all = [];
  for (const ctx of app.bridges.values()) for (const s of ctx.sessions.values()) all.push(s.flush());
  return Promise.all(all);
}

/** Shows what the URL names (`#b=…&s=…`): that bridge, and that session on it. */
async function openRoute(route, starting) {
  if (!route) return;
  if (!app.bridges.has(route.bridgeId)) {
    toast('That link names a computer this phone is not paired with.', 'warn');
    if (starting) showHome();
    return;
  }
  activate(route.bridgeId, !route.sessionId && !route.terminalId);
  if (route.terminalId) {
    attachTerminal(route.terminalId);
  } else if (route.sessionId) {
    const s = await loadSession(route.sessionId);
    s.followed = true;
    openSessionView(s);
    if (app.link && s.attachedOn !== app.link) attach(s);
  }
}

main().catch((e) => {
  console.error(e);
  document.body.append(h('p', { class: 'fatal' }, `The app failed to start: ${e.message ?? e}`));
});
