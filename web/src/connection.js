// The link to the bridge and keeping it: which server this page is on (LAN or relay),
// opening the link, reconnecting with backoff (250 ms doubling to 5 s) when it drops
// or the bridge is offline, re-attaching every followed session, the bridge's status
// and push notices, and a check when the page becomes visible again.

import { app, currentSession } from './state.js';
import { openLink, ControlError, VERSION_MISMATCH } from './link.js';
import { toast, setConn, setPath, noteRejected } from './status.js';
import { attach } from './sessions.js';
import { onBlock } from './session-view.js';
import { updateComposer } from './composer.js';
import { fillAgents } from './new-session.js';
import { refreshLists } from './lists.js';
import { onSocketPush } from './notifications.js';

const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 5000;

/** The reconnection's own state: the next delay, the pending retry, a connect under way. */
const reconnect = { backoff: BACKOFF_MIN_MS, timer: null, connecting: false };

async function detectServer() {
  try {
    const res = await fetch('/v1/server', { cache: 'no-store' });
    if (res.ok) {
      const v = await res.json();
      if (v && (v.kind === 'lan' || v.kind === 'relay')) return v.kind;
    }
  } catch {
    /* fall through */
  }
  // Without the endpoint: the LAN if the pairing named this origin as the LAN server.
  try {
    if (app.bridge?.lan && new URL(app.bridge.lan.replace(/^ws/, 'http')).host === location.host) return 'lan';
  } catch {
    /* not a URL */
  }
  return 'relay';
}

function scheduleReconnect(state = 'offline', label = 'reconnecting…') {
  if (reconnect.timer || !app.bridge) return;
  const delay = reconnect.backoff * (0.8 + Math.random() * 0.4);
  reconnect.backoff = Math.min(BACKOFF_MAX_MS, reconnect.backoff * 2);
  setConn(state, label);
  reconnect.timer = setTimeout(() => {
    reconnect.timer = null;
    connect();
  }, delay);
}

export async function connect() {
  if (!app.bridge || app.link || reconnect.connecting) return;
  clearTimeout(reconnect.timer);
  reconnect.timer = null;
  reconnect.connecting = true;
  setConn('connecting', 'connecting…');
  try {
    if (!app.serverKind) setPath(await detectServer());
    const url = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/v1/client`;
    let link = null;
    link = await openLink({
      url,
      identity: app.identity,
      bridge: { bridgeId: app.bridge.bridgeId, keys: app.bridge.keys },
      direct: app.serverKind === 'lan',
      pushLast: app.pushLast,
      onBlock: (sid, block, replay) => onBlock(sid, block, replay),
      onReplayDone: () => {},
      onStatus: (status) => onStatus(status),
      onPush: (notice, counter) => onPush(notice, counter),
      onReject: (reason) => noteRejected(reason),
      onRelayError: (frame) => {
        if (frame.code !== 'unauthorized') toast(`relay: ${frame.message ?? frame.code}`, 'warn');
      },
      onClose: (reason, code) => {
        if (app.link === link) {
          app.link = null;
          console.info(`link closed: ${reason}`);
          for (const s of app.sessions.values()) s.attachedOn = null;
          if (code === VERSION_MISMATCH) versionMismatch(reason);
          else scheduleReconnect();
          updateComposer(currentSession());
        }
      },
    });
    app.link = link;
    reconnect.backoff = BACKOFF_MIN_MS;
    reconnect.connecting = false;
    onStatus(link.status);
    updateComposer(currentSession());
    // Re-attach every followed session, from the newest block held.
    for (const s of app.sessions.values()) if (s.followed) attach(s);
    refreshLists();
    refreshAgents(link);
  } catch (e) {
    reconnect.connecting = false;
    console.warn(`connect: ${e.message ?? e}`);
    if (e.code === VERSION_MISMATCH) {
      versionMismatch(String(e.message));
      return;
    }
    if (/unknown_device/.test(String(e.message)) && app.shortCode) {
      // Just paired: the bridge holds the device until its terminal confirms the
      // short code (docs/bridge.md, "Confirming the short code"); retry meanwhile.
      reconnect.backoff = Math.min(reconnect.backoff, 1000);
      scheduleReconnect('connecting', 'confirm the code on the computer…');
      return;
    }
    if (/unknown_device/.test(String(e.message))) {
      setConn('offline', 'not paired');
      toast('The bridge does not know this device (revoked?). Pair again.', 'warn');
      return;
    }
    if (/bridge_offline/.test(String(e.message))) scheduleReconnect('bridge-offline', 'bridge offline');
    else scheduleReconnect();
  }
}

/** The server speaks another protocol version: said on screen, and no retry (it would fail the same way). */
function versionMismatch(sentence) {
  setConn('offline', 'update needed');
  // The toast goes after a while; the status keeps the sentence.
  app.ui.conn.title = sentence;
  toast(sentence, 'warn');
}

function onStatus(status) {
  const wasOnline = app.bridgeOnline;
  app.bridgeOnline = status.bridge_online || app.serverKind === 'lan';
  if (app.link && !wasOnline && app.bridgeOnline) {
    // The bridge reconnected to the relay: it holds no link for this connection any
    // more. Open a fresh one (and resume every followed session on it).
    app.link.close('the bridge came back online');
    return;
  }
  if (app.link) setConn(app.bridgeOnline ? 'connected' : 'bridge-offline', app.bridgeOnline ? 'connected' : 'bridge offline');
  if (app.view === 'new') fillAgents();
}

/** The agents from the bridge's sealed `list_agents` reply (the relay_status copy is not authenticated). */
async function refreshAgents(link) {
  try {
    const agents = await link.refreshAgents();
    if (app.link !== link) return;
    app.agents = agents;
    if (app.view === 'new') fillAgents();
  } catch (e) {
    console.warn(`list_agents: ${e.message ?? e}`);
  }
}

function onPush(notice, counter) {
  app.pushLast = counter;
  app.store.set(`push:${app.bridge.bridgeId}`, counter.toString()).catch(() => {});
  if (notice && typeof notice.title === 'string' && notice.session_id !== app.current) toast(notice.title);
  if (notice) onSocketPush(notice);
}

/** Checks a link that may have died while the phone slept; reconnects if so. */
export async function checkLink() {
  if (!app.bridge) return;
  if (!app.link) {
    reconnect.backoff = BACKOFF_MIN_MS;
    connect();
    return;
  }
  const link = app.link;
  try {
    await link.request({ type: 'list_sessions' }, 5000);
  } catch (e) {
    if (e instanceof ControlError && (e.code === 'timeout' || e.code === 'link') && app.link === link) {
      link.close('no answer after waking');
    }
  }
}
