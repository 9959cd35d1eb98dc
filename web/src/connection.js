// The links to the paired bridges and keeping them: which server this page is on (LAN
// or relay), which bridges it can reach from there, one link per reachable bridge,
// reconnecting each with backoff (250 ms doubling to 5 s) when it drops or its bridge
// is offline, re-attaching every followed session, each bridge's status and push
// notices, and a check when the page becomes visible again. The header shows the
// active bridge's state; the switcher shows every bridge's.

import { app, activeCtx, currentSession } from './state.js';
import { openLink, ControlError, VERSION_MISMATCH } from './link.js';
import { toast, setConn, setPath, noteRejected } from './status.js';
import { attach, loadSession } from './sessions.js';
import { onBlock } from './session-view.js';
import { updateComposer } from './composer.js';
import { fillAgents } from './new-session.js';
import { refreshLists, renderLists } from './lists.js';
import { renderSwitcher } from './switcher.js';
import { displayName } from './bridges.js';
import { onSocketPush } from './notifications.js';
import { offerChannel } from './rtc.js';

const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 5000;
/**
 * The LAN data channel (docs/web-client.md, "The LAN as a data channel"): offered once
 * the relay link is up; after a failure or a loss, again after this long, doubling to
 * LAN_RETRY_MAX_MS (a path that just dropped is not taken back at once: hysteresis),
 * and at once when the network changes.
 */
const LAN_RETRY_MS = 5000;
/** On the LAN page, how long the LAN server has to answer before the relay is raced beside it. */
const LAN_HEAD_START_MS = 1500;
const LAN_RETRY_MAX_MS = 60000;

/** The relay's device endpoint from a pairing (`ws[s]://host[:port]/v1/client`), or null. */
export function relayClientUrl(bridge) {
  try {
    if (typeof bridge?.relay !== 'string') return null;
    const u = new URL(bridge.relay);
    if (u.protocol !== 'ws:' && u.protocol !== 'wss:') return null;
    return `${u.protocol}//${u.host}/v1/client`;
  } catch {
    return null;
  }
}

/** The host of a pairing's LAN address, or null. */
function lanHost(bridge) {
  try {
    return bridge?.lan ? new URL(bridge.lan.replace(/^ws/, 'http')).host : null;
  } catch {
    return null;
  }
}

export async function detectServer() {
  try {
    const res = await fetch('/v1/server', { cache: 'no-store' });
    if (res.ok) {
      const v = await res.json();
      if (v && (v.kind === 'lan' || v.kind === 'relay')) return v.kind;
    }
  } catch {
    /* fall through */
  }
  // Without the endpoint: the LAN if a pairing named this origin as the LAN server.
  for (const ctx of app.bridges.values()) if (lanHost(ctx.bridge) === location.host) return 'lan';
  return 'relay';
}

/**
 * Which bridges this page can reach. The relay's page reaches every bridge paired
 * here (they paired through this relay). A LAN page is one bridge's own server: it
 * reaches that bridge only — the one whose pairing named this host, else (a LAN
 * address the pairing did not name) the active one when it is the only bridge.
 */
export function markReachable() {
  const lan = app.serverKind === 'lan';
  const own = [...app.bridges.values()].filter((c) => lanHost(c.bridge) === location.host);
  for (const ctx of app.bridges.values()) {
    ctx.reachable = !lan || own.includes(ctx) || (own.length === 0 && app.bridges.size === 1);
    ctx.unreachable = ctx.reachable ? null : 'not reachable from this page: it is another computer’s LAN server; use the relay’s page for this one';
    if (!ctx.reachable) ctxConn(ctx, 'offline', 'other LAN');
  }
}

/** Sets a bridge's connection state: the header shows the active one's, the switcher all. */
function ctxConn(ctx, state, label) {
  ctx.connState = state;
  ctx.connLabel = label ?? state;
  if (ctx === activeCtx()) {
    setConn(state, label);
    if (app.serverKind) setPath(app.serverKind, ctx.linkPath);
  }
  renderSwitcher();
}

function live(ctx) {
  return !ctx.forgotten && app.bridges.get(ctx.id) === ctx;
}

function scheduleReconnect(ctx, state = 'offline', label = 'reconnecting…') {
  const r = ctx.reconnect;
  if (r.timer || !live(ctx)) return;
  const delay = r.backoff * (0.8 + Math.random() * 0.4);
  r.backoff = Math.min(BACKOFF_MAX_MS, r.backoff * 2);
  ctxConn(ctx, state, label);
  r.timer = setTimeout(() => {
    r.timer = null;
    connect(ctx);
  }, delay);
}

/** Opens a link to every reachable bridge that has none. */
export function connectAll() {
  for (const ctx of app.bridges.values()) connect(ctx);
}

/** Opens the link to bridge `ctx` (the active one by default), unless it has one or cannot be reached. */
export async function connect(ctx = activeCtx()) {
  if (!ctx || !live(ctx) || ctx.link || ctx.reconnect.connecting) return;
  if (app.serverKind && !ctx.reachable) return;
  const r = ctx.reconnect;
  clearTimeout(r.timer);
  r.timer = null;
  r.connecting = true;
  ctxConn(ctx, 'connecting', 'connecting…');
  try {
    if (!app.serverKind) {
      setPath(await detectServer());
      markReachable();
      if (!ctx.reachable) {
        r.connecting = false;
        return;
      }
    }
    const { link, path } = await openFirst(ctx);
    r.connecting = false;
    if (!live(ctx)) {
      link.close('the bridge was forgotten');
      return;
    }
    adopt(ctx, link, path);
    r.backoff = BACKOFF_MIN_MS;
    if (ctx === activeCtx()) refreshLists();
    else listSessions(ctx, link);
    refreshAgents(ctx, link);
    if (path === 'relay') moveToLan(ctx);
  } catch (e) {
    r.connecting = false;
    console.warn(`connect ${ctx.id}: ${e.message ?? e}`);
    if (e.code === VERSION_MISMATCH) {
      versionMismatch(ctx, String(e.message));
      return;
    }
    if (/unknown_device/.test(String(e.message)) && app.shortCode && app.shortCodeBridge === ctx.id) {
      // Just paired: the bridge holds the device until its terminal confirms the
      // short code (docs/bridge.md, "Confirming the short code"); retry meanwhile.
      r.backoff = Math.min(r.backoff, 1000);
      scheduleReconnect(ctx, 'connecting', 'confirm the code on the computer…');
      return;
    }
    if (/unknown_device/.test(String(e.message))) {
      ctxConn(ctx, 'offline', 'not paired');
      if (ctx === activeCtx()) toast('The bridge does not know this device (revoked?). Pair again.', 'warn');
      return;
    }
    if (/bridge_offline/.test(String(e.message))) scheduleReconnect(ctx, 'bridge-offline', 'bridge offline');
    else scheduleReconnect(ctx);
  }
}

/** This page's own server's device endpoint (the relay's, or the bridge's LAN server). */
function ownUrl() {
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/v1/client`;
}

/**
 * The first link of a connect: this page's own server; on the bridge's LAN page, the
 * LAN server and the relay its pairing named, raced: the LAN gets a head start of
 * LAN_HEAD_START_MS and wins when it answers within it; otherwise (refused, or silent:
 * a phone on another network waits out the handshake timeout there) the relay is
 * tried beside it and the first link up is kept, the other closed when it opens. When
 * the LAN link was lost moments ago, the relay goes first. One pairing, both paths
 * (docs/web-client.md).
 */
async function openFirst(ctx) {
  const relay = app.serverKind === 'lan' ? relayClientUrl(ctx.bridge) : null;
  if (!relay) return { link: await openPath(ctx, ownUrl(), app.serverKind === 'lan'), path: app.serverKind === 'lan' ? 'lan' : 'relay' };
  const lan = ctx.lan ?? (ctx.lan = { retry: LAN_RETRY_MS });
  const recentlyLost = lan.lostAt != null && Date.now() - lan.lostAt < lan.retry;
  if (recentlyLost) return { link: await openPath(ctx, relay, false), path: 'relay' };
  const lanTry = openPath(ctx, ownUrl(), true).then((link) => ({ link, path: 'lan' }));
  lanTry.catch((e) => {
    console.info(`LAN server of ${ctx.id}: ${e.message ?? e}`);
    lan.lostAt = Date.now();
  });
  const early = await Promise.race([lanTry.catch(() => null), new Promise((r) => setTimeout(() => r('slow'), LAN_HEAD_START_MS))]);
  if (early && early !== 'slow') return early;
  const relayTry = openPath(ctx, relay, false).then((link) => ({ link, path: 'relay' }));
  let winner;
  try {
    winner = await Promise.any([lanTry, relayTry]);
  } catch (e) {
    throw e instanceof AggregateError ? e.errors[e.errors.length - 1] : e;
  }
  for (const tried of [lanTry, relayTry]) {
    tried.then((r) => r !== winner && r.link.close('the other path answered first')).catch(() => {});
  }
  if (winner.path === 'relay') lan.lostAt ??= Date.now();
  return winner;
}

/**
 * Opens a link over `socket` (a LAN data channel) or to `url`, with this bridge's
 * handlers; when it closes while it is the bridge's link, the link is reopened (the
 * relay first, then the LAN again after LAN_RETRY_MS).
 */
function openPath(ctx, url, direct, socket = null) {
  let link = null;
  return openLink({
    url,
    WebSocket: socket ? function ChannelAsWebSocket() { return socket; } : undefined,
    identity: app.identity,
    bridge: { bridgeId: ctx.bridge.bridgeId, keys: ctx.bridge.keys },
    direct,
    pushLast: ctx.pushLast,
    // Only the bridge's current link delivers: a block the old path still carries
    // after a move is dropped (the new link resumed from the newest block held).
    onBlock: (sid, block, replay) => {
      if (ctx.link !== link && link) return;
      // Which path carried how many blocks (window.terminull.pathBlocks, for the tests).
      const counts = (app.pathBlocks ??= { lan: 0, relay: 0 });
      counts[direct ? 'lan' : 'relay'] += 1;
      onBlock(sid, block, replay, ctx);
    },
    onReplayDone: () => {},
    // The terminal view's hooks (app.terminals, set by main.js: xterm.js stays out of this module's graph).
    onTerminal: (id, message) => {
      if (ctx.link !== link && link) return;
      app.terminals?.onTerminal(ctx, id, message);
    },
    onStatus: (status) => {
      if (ctx.link === link || !link) onStatus(ctx, status);
    },
    onPush: (notice, counter) => onPush(ctx, notice, counter),
    onReject: (reason) => noteRejected(reason),
    onRelayError: (frame) => {
      if (frame.code !== 'unauthorized') toast(`relay: ${frame.message ?? frame.code}`, 'warn');
    },
    onClose: (reason, code) => {
      if (ctx.link !== link) return;
      ctx.link = null;
      console.info(`link to ${ctx.id} (${ctx.linkPath}) closed: ${reason}`);
      if (ctx.linkPath === 'lan') lanLost(ctx);
      ctx.linkPath = null;
      for (const s of ctx.sessions.values()) s.attachedOn = null;
      if (code === VERSION_MISMATCH) versionMismatch(ctx, reason);
      else scheduleReconnect(ctx);
      if (ctx === activeCtx()) updateComposer(currentSession());
    },
  }).then((opened) => {
    link = opened;
    return opened;
  });
}

/** Makes `link` the bridge's link over `path` (`lan` or `relay`) and resumes every followed session on it by seq. */
function adopt(ctx, link, path) {
  ctx.link = link;
  ctx.linkPath = path;
  onStatus(ctx, link.status);
  if (ctx === activeCtx()) updateComposer(currentSession());
  // Re-attach every followed session, from the newest block held.
  for (const s of ctx.sessions.values()) {
    s.attachedOn = null;
    if (s.followed) attach(s);
  }
  app.terminals?.reattach(ctx, link);
}

function lanLost(ctx) {
  const lan = ctx.lan ?? (ctx.lan = { retry: LAN_RETRY_MS });
  lan.lostAt = Date.now();
  // The relay takes over at once (scheduleReconnect's first delay is short).
  ctx.reconnect.backoff = BACKOFF_MIN_MS;
}

/**
 * With the bridge's link on the relay: after the hysteresis wait (LAN_RETRY_MS since
 * the LAN was lost or last failed, doubling to LAN_RETRY_MAX_MS on each failure), opens
 * a link on the LAN — on the relay's page a data channel offered through the relay
 * link, on the bridge's LAN page its LAN server again — and, once it runs, makes it the
 * bridge's link (resuming by seq) and closes the relay link. A bridge without a LAN
 * server answers the offer `not_supported`: not offered again until the page reloads
 * or the network changes.
 */
async function moveToLan(ctx) {
  const lan = ctx.lan ?? (ctx.lan = { retry: LAN_RETRY_MS });
  const relay = ctx.link;
  if (!relay || ctx.linkPath !== 'relay' || lan.trying || lan.unsupported || lan.timer || !live(ctx)) return;
  const lanPage = app.serverKind === 'lan';
  if (!lanPage && typeof globalThis.RTCPeerConnection !== 'function') return;
  const wait = (lan.lostAt ?? 0) + lan.retry - Date.now();
  if (wait > 0) {
    lan.timer = setTimeout(() => {
      lan.timer = null;
      moveToLan(ctx);
    }, wait);
    return;
  }
  lan.trying = true;
  try {
    const link = lanPage ? await openPath(ctx, ownUrl(), true) : await openChannel(ctx, relay);
    if (ctx.link !== relay || !live(ctx)) {
      link.close('not needed any more');
      return;
    }
    lan.retry = LAN_RETRY_MS;
    lan.lostAt = null;
    adopt(ctx, link, 'lan');
    ctxConn(ctx, ctx.connState, ctx.connLabel);
    relay.close('moved to the LAN');
  } catch (e) {
    if (e instanceof ControlError && e.code === 'not_supported') lan.unsupported = true;
    console.info(`LAN path to ${ctx.id}: ${e.message ?? e}`);
    lan.lostAt = Date.now();
    lan.retry = Math.min(LAN_RETRY_MAX_MS, lan.retry * 2);
    if (!lan.unsupported) moveToLan(ctx);
  } finally {
    lan.trying = false;
  }
}

/** A link on a LAN data channel offered through the `relay` link. */
async function openChannel(ctx, relay) {
  const socket = await offerChannel(relay);
  return openPath(ctx, 'rtc:lan', true, socket).catch((e) => {
    socket.close(1000, 'no link');
    throw e;
  });
}

/** The network changed: try the LAN path again at once, everywhere. */
export function networkChanged() {
  for (const ctx of app.bridges.values()) {
    if (!ctx.lan) continue;
    clearTimeout(ctx.lan.timer);
    ctx.lan = { retry: LAN_RETRY_MS };
    moveToLan(ctx);
  }
}

/** Closes a forgotten bridge's link for good. */
export function disconnect(ctx) {
  ctx.forgotten = true;
  clearTimeout(ctx.reconnect.timer);
  ctx.reconnect.timer = null;
  const link = ctx.link;
  ctx.link = null;
  link?.close('the bridge was forgotten');
}

/** The server speaks another protocol version: said on screen, and no retry (it would fail the same way). */
function versionMismatch(ctx, sentence) {
  ctxConn(ctx, 'offline', 'update needed');
  if (ctx !== activeCtx()) return;
  // The toast goes after a while; the status keeps the sentence.
  app.ui.conn.title = sentence;
  toast(sentence, 'warn');
}

function onStatus(ctx, status) {
  const wasOnline = ctx.bridgeOnline;
  ctx.bridgeOnline = status.bridge_online || app.serverKind === 'lan';
  if (ctx.link && !wasOnline && ctx.bridgeOnline) {
    // The bridge reconnected to the relay: it holds no link for this connection any
    // more. Open a fresh one (and resume every followed session on it).
    ctx.link.close('the bridge came back online');
    return;
  }
  if (ctx.link) ctxConn(ctx, ctx.bridgeOnline ? 'connected' : 'bridge-offline', ctx.bridgeOnline ? 'connected' : 'bridge offline');
  if (ctx === activeCtx() && app.view === 'new') fillAgents();
}

/** The sessions of a bridge not shown, for the switcher's counts (`awaiting_permission`). */
async function listSessions(ctx, link) {
  try {
    const r = await link.request({ type: 'list_sessions' });
    if (ctx.link !== link) return;
    ctx.listings = Array.isArray(r.sessions) ? r.sessions.filter((s) => s && typeof s.session_id === 'string') : [];
    renderSwitcher();
    if (app.view === 'home') renderLists();
  } catch (e) {
    console.warn(`list_sessions: ${e.message ?? e}`);
  }
}

/** The agents from the bridge's sealed `list_agents` reply (the relay_status copy is not authenticated). */
async function refreshAgents(ctx, link) {
  try {
    const agents = await link.refreshAgents();
    if (ctx.link !== link) return;
    ctx.agents = agents;
    if (ctx === activeCtx() && app.view === 'new') fillAgents();
  } catch (e) {
    console.warn(`list_agents: ${e.message ?? e}`);
  }
}

async function onPush(ctx, notice, counter) {
  ctx.pushLast = counter;
  app.store.set(`push:${ctx.id}`, counter.toString()).catch(() => {});
  if (!notice || typeof notice.session_id !== 'string') return;
  const shown = ctx === activeCtx() && notice.session_id === app.current;
  if (typeof notice.title === 'string' && !shown) toast(app.bridges.size > 1 ? `${displayName(ctx.bridge)}: ${notice.title}` : notice.title);
  onSocketPush(ctx, notice);
  // A session this page does not follow asks for something: follow it, so its
  // waiting request counts in the switcher (and is there when opened).
  if (!ctx.sessions.get(notice.session_id)?.followed && ctx.sessions.size < 64) {
    const s = await loadSession(notice.session_id, ctx);
    if (!live(ctx)) return;
    s.followed = true;
    if (ctx.link && s.attachedOn !== ctx.link) attach(s);
  }
}

/** Checks the links that may have died while the phone slept; reconnects those. */
export async function checkLink() {
  for (const ctx of app.bridges.values()) checkOne(ctx);
}

async function checkOne(ctx) {
  if (!ctx.reachable || !live(ctx)) return;
  if (!ctx.link) {
    ctx.reconnect.backoff = BACKOFF_MIN_MS;
    connect(ctx);
    return;
  }
  const link = ctx.link;
  try {
    await link.request({ type: 'list_sessions' }, 5000);
  } catch (e) {
    if (e instanceof ControlError && (e.code === 'timeout' || e.code === 'link') && ctx.link === link) {
      link.close('no answer after waking');
    }
  }
}
