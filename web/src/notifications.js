// Notifications that reach a closed app (docs/web-client.md, "Notifications"): one
// switch and the per-event switches on the home view, for every paired bridge.
// Turning it on asks the browser's permission, registers the service worker,
// subscribes once with the relay's VAPID key, and then, per bridge this page reaches:
// registers the subscription at the relay for that bridge (signed by this device) and
// writes what the worker needs to open that bridge's sealed pushes into IndexedDB
// (`terminull-sw-push`, one record per bridge). Each bridge is told over its own link
// which events this device wants (`push_settings`) and which of its sessions a
// visible screen shows (`presence`: the active bridge's shown session on its link,
// none on the others), and enforces both. A tap on a notification (or its Allow/Deny)
// arrives here as an intent naming the bridge: show that bridge and session, and
// answer on that bridge's link as the card would.

import * as c from './crypto.js';
import { app, activeCtx } from './state.js';
import { h } from './dom.js';
import { toast } from './status.js';
import { openSession } from './session-view.js';
import { activate } from './switcher.js';
import { displayName } from './bridges.js';
import { putPushRecord, deletePushRecord, takeIntent } from './sw/push-db.js';
import { notificationOf } from './sw/push.js';

/** The events a user can switch, in the order shown, with their labels. */
export const EVENTS = [
  ['permission_needed', 'A permission request waits'],
  ['question', 'The agent asks a question'],
  ['turn_finished', 'A turn finished while away'],
  ['error', 'An error or abnormal end'],
];
const PRESENCE_REPEAT_MS = 30_000;
const PRESENCE_CHECK_MS = 1_000;
/** Store key of the switches (one choice for every bridge of this page). */
const SETTINGS_KEY = 'notify';

/**
 * `settings`: `{enabled, kinds}`. `links`: bridge id → what was sent on its link:
 * `{link, presenceSent, presenceAt, registered}` (`registered`: the subscription was
 * registered at the relay for that bridge while this page lives).
 */
const state = { settings: null, links: new Map(), socketPushes: 0 };

// Read by the browser tests: pushes that reached the page over its sockets.
globalThis.terminullPush = {
  get socketPushes() {
    return state.socketPushes;
  },
};

function perLink(ctx) {
  let p = state.links.get(ctx.id);
  if (!p) {
    p = { link: null, presenceSent: null, presenceAt: 0, registered: false };
    state.links.set(ctx.id, p);
  }
  return p;
}

/** Whether this page can have notifications at all (a secure context with the APIs). */
export function supported() {
  return Boolean(globalThis.isSecureContext && 'serviceWorker' in navigator && 'PushManager' in globalThis && 'Notification' in globalThis);
}

/** The stored choice: `{enabled, kinds}`. */
async function loadSettings() {
  const saved = await app.store.get(SETTINGS_KEY).catch(() => null);
  return saved && Array.isArray(saved.kinds) ? saved : { enabled: false, kinds: EVENTS.map(([k]) => k) };
}

/** Builds the settings section on the home view and starts presence reports. */
export async function installNotifications() {
  const ui = app.ui;
  ui.notifySwitch = h('input', { type: 'checkbox', role: 'switch', testid: 'notify-switch', onchange: () => switched() });
  ui.notifyMsg = h('p', { class: 'notify-msg', testid: 'notify-msg' });
  ui.notifyKinds = new Map();
  const kinds = h('div', { class: 'notify-kinds' });
  for (const [kind, label] of EVENTS) {
    const box = h('input', { type: 'checkbox', testid: `notify-kind-${kind}`, onchange: () => kindsChanged() });
    ui.notifyKinds.set(kind, box);
    kinds.append(h('label', { class: 'notify-kind' }, box, h('span', null, label)));
  }
  ui.notifySection = h(
    'section',
    { class: 'notify', testid: 'notifications' },
    h('label', { class: 'notify-head' }, h('span', null, 'Notifications'), ui.notifySwitch),
    kinds,
    ui.notifyMsg,
  );
  ui.viewHome.append(ui.notifySection);
  state.settings = await loadSettings();
  showSettings();
  if (!supported()) {
    ui.notifySwitch.disabled = true;
    ui.notifyMsg.textContent =
      'Notifications need the https page of the relay (or an installed app): this page cannot have them (plain http on the LAN).';
  }
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.addEventListener('message', (e) => {
      if (e.data?.type === 'terminull-open') handleIntent(e.data.intent);
    });
    navigator.serviceWorker.startMessages?.();
  }
  setInterval(() => reportPresence(), PRESENCE_CHECK_MS);
  document.addEventListener('visibilitychange', () => reportPresence());
}

function showSettings() {
  const s = state.settings;
  app.ui.notifySwitch.checked = s.enabled;
  app.ui.notifySection.dataset.state = s.enabled ? 'on' : 'off';
  for (const [kind, box] of app.ui.notifyKinds) {
    box.checked = s.kinds.includes(kind);
    box.disabled = !s.enabled;
  }
}

async function save() {
  await app.store.set(SETTINGS_KEY, state.settings).catch(() => {});
  showSettings();
  for (const ctx of app.bridges.values()) sendSettings(ctx);
}

async function switched() {
  const on = app.ui.notifySwitch.checked;
  app.ui.notifySwitch.disabled = true;
  try {
    if (on) {
      const failed = await enable();
      app.ui.notifyMsg.textContent = failed.length
        ? `On, but not for ${failed.join('; ')}.`
        : `This phone is notified when an agent${app.bridges.size > 1 ? ' on any of your computers' : ''} needs you and no screen shows the session.`;
    } else {
      await disable();
      app.ui.notifyMsg.textContent = '';
    }
    state.settings.enabled = on;
  } catch (e) {
    state.settings.enabled = false;
    app.ui.notifyMsg.textContent = `Notifications could not be turned on: ${e.message ?? e}`;
  } finally {
    app.ui.notifySwitch.disabled = !supported();
    await save();
  }
}

function kindsChanged() {
  state.settings.kinds = [...app.ui.notifyKinds].filter(([, box]) => box.checked).map(([k]) => k);
  save();
}

/** The worker's registration (registered on first use). */
async function registration() {
  const existing = await navigator.serviceWorker.getRegistration('/');
  const reg = existing ?? (await navigator.serviceWorker.register('/sw.js', { scope: '/' }));
  await navigator.serviceWorker.ready;
  return reg;
}

/** What the relay's HTTP API takes to register or delete `subscription` for bridge `ctx`. */
function signedChange(ctx, subscription) {
  const deviceId = c.deviceIdOf(app.identity.ed25519Public);
  const bridgeId = ctx.id;
  const { endpoint, keys } = subscription;
  const ts = Math.floor(Date.now() / 1000);
  const sig = c.sign(app.identity, c.pushSubscriptionBytes(bridgeId, deviceId, endpoint, keys.p256dh, keys.auth, ts));
  return JSON.stringify({ bridge_id: bridgeId, device_id: deviceId, subscription: { endpoint, keys }, ts, sig: c.b64(sig) });
}

async function relayCall(method, body) {
  const res = await fetch('/v1/push/subscriptions', { method, headers: { 'content-type': 'application/json' }, body });
  if (!res.ok) throw new Error(`the relay answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
}

/** The browser's subscription as JSON, or null (never subscribing). */
async function currentSubscription() {
  const reg = await navigator.serviceWorker.getRegistration('/');
  const sub = await reg?.pushManager.getSubscription();
  const json = sub?.toJSON();
  return json?.endpoint && json.keys?.p256dh && json.keys?.auth ? json : null;
}

/**
 * Subscribes and registers with every bridge this page reaches. Throws when none
 * could be registered; returns the sentences of those that could not.
 */
async function enable() {
  if (!supported()) throw new Error('not available on this page');
  const permission = await Notification.requestPermission();
  if (permission !== 'granted') throw new Error(`the browser's permission is "${permission}"`);
  const reg = await registration();
  const vapid = await (await fetch('/v1/push/vapid', { cache: 'no-store' })).json();
  const key = c.fromB64url(vapid.public_key, 'public_key');
  const sub = (await reg.pushManager.getSubscription()) ?? (await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key }));
  const json = sub.toJSON();
  if (!json.endpoint || !json.keys?.p256dh || !json.keys?.auth) throw new Error('the browser gave no usable subscription');
  const failed = [];
  let done = 0;
  for (const ctx of app.bridges.values()) {
    if (!ctx.reachable) continue;
    try {
      await register(ctx, json);
      done += 1;
    } catch (e) {
      failed.push(`${displayName(ctx.bridge)} (${e.message ?? e})`);
    }
  }
  if (!done) throw new Error(failed.length ? failed.join('; ') : 'no paired computer is reachable from this page');
  return failed;
}

/** Registers `subscription` at the relay for bridge `ctx` and writes the worker's record for it. */
async function register(ctx, subscription) {
  await relayCall('POST', signedChange(ctx, subscription));
  await writeRecord(ctx);
  perLink(ctx).registered = true;
}

/** Writes the worker's record of bridge `ctx`: ids, the push key and the last counter opened. */
async function writeRecord(ctx) {
  const bridge = c.publicKeysFromWire(ctx.bridge.keys);
  const deviceId = c.deviceIdOf(app.identity.ed25519Public);
  const shared = c.agree(app.identity.x25519Secret, bridge.x25519, 'bridge x25519');
  const pushKey = c.pushKey(shared, ctx.id, deviceId);
  shared.fill(0);
  await putPushRecord({ bridgeId: ctx.id, deviceId, pushKey: c.b64url(pushKey), last: ctx.pushLast.toString() });
}

/** Deletes the subscription at the relay for every bridge, the worker's records, and unsubscribes. */
async function disable() {
  for (const ctx of app.bridges.values()) await unregister(ctx);
  if (!supported()) return;
  const reg = await navigator.serviceWorker.getRegistration('/');
  const sub = await reg?.pushManager.getSubscription();
  await sub?.unsubscribe().catch(() => {});
}

/** Deletes bridge `ctx`'s worker record and its subscription at the relay. */
async function unregister(ctx) {
  perLink(ctx).registered = false;
  if (globalThis.indexedDB) await deletePushRecord(ctx.id).catch(() => {});
  if (!supported() || !ctx.reachable) return;
  const json = await currentSubscription().catch(() => null);
  if (json) await relayCall('DELETE', signedChange(ctx, json)).catch((e) => console.warn(`unsubscribe ${ctx.id} at the relay: ${e.message}`));
}

/** A bridge is being forgotten: its pushes stop (the relay's subscription and the worker's key go). */
export async function bridgeForgotten(ctx) {
  await unregister(ctx).catch(() => {});
  state.links.delete(ctx.id);
}

/** The kinds the bridge is told: none while switched off. */
function wantedKinds() {
  const s = state.settings;
  return s?.enabled ? s.kinds : [];
}

/** Tells bridge `ctx` this device's switches (on every new link and every change). */
function sendSettings(ctx) {
  const link = ctx.link;
  if (!link || !state.settings) return;
  link.request({ type: 'push_settings', kinds: wantedKinds() }).catch((e) => console.warn(`push_settings ${ctx.id}: ${e.message ?? e}`));
}

/** The sessions of bridge `ctx` this page shows on a visible screen now. */
export function visibleSessions(ctx = activeCtx()) {
  const shown = document.visibilityState === 'visible' && app.view === 'session' && app.current;
  return shown && ctx && ctx === activeCtx() ? [app.current] : [];
}

/** Reports presence on every link. */
function reportPresence() {
  for (const ctx of app.bridges.values()) reportOn(ctx);
}

/**
 * On bridge `ctx`'s link: presence when it changed, on a new link, or every 30 s
 * while a session is visible; the switches on a new link. A bridge paired after
 * notifications were turned on is registered at the relay on its first link.
 */
function reportOn(ctx) {
  const link = ctx.link;
  if (!link) return;
  const p = perLink(ctx);
  const visible = visibleSessions(ctx);
  const key = JSON.stringify(visible);
  const fresh = p.link !== link;
  const due = visible.length > 0 && Date.now() - p.presenceAt > PRESENCE_REPEAT_MS;
  if (fresh) {
    p.link = link;
    sendSettings(ctx);
    if (state.settings?.enabled && !p.registered) registerLate(ctx);
  }
  if (!fresh && key === p.presenceSent && !due) return;
  p.presenceSent = key;
  p.presenceAt = Date.now();
  link.request({ type: 'presence', visible_session_ids: visible }).catch(() => {
    p.presenceSent = null;
  });
}

/** Registers bridge `ctx` with the subscription the browser already has (never asking again). */
async function registerLate(ctx) {
  const p = perLink(ctx);
  p.registered = true;
  try {
    if (!supported() || Notification.permission !== 'granted') throw new Error('no permission');
    const json = await currentSubscription();
    if (!json) throw new Error('no subscription');
    await register(ctx, json);
  } catch (e) {
    p.registered = false;
    console.warn(`notifications for ${ctx.id}: ${e.message ?? e}`);
  }
}

/**
 * A push that reached the open page over bridge `ctx`'s socket (the relay sends the
 * socket rather than Web Push while the page is connected). While the page is
 * hidden it is shown as a system notification, exactly as the worker would show it.
 */
export async function onSocketPush(ctx, notice) {
  state.socketPushes += 1;
  if (!state.settings?.enabled || document.visibilityState === 'visible' || !supported()) return false;
  if (!state.settings.kinds.includes(notice?.kind)) return false;
  try {
    const reg = await navigator.serviceWorker.getRegistration('/');
    if (!reg) return false;
    const { title, options } = notificationOf(notice, ctx.id);
    await reg.showNotification(title, options);
    return true;
  } catch {
    return false;
  }
}

/**
 * Handles what a tap on a notification asked: show its bridge and open the session,
 * and answer on that bridge's link when an action was chosen.
 */
export async function handleIntent(intent) {
  if (!intent || typeof intent.session_id !== 'string') return;
  const bridgeId = intent.bridge_id ?? app.activeId;
  const ctx = app.bridges.get(bridgeId);
  if (!ctx) return toast('That notification is from a computer this phone is no longer paired with.', 'warn');
  if (!(app.activeId === ctx.id && app.view === 'session' && app.current === intent.session_id)) {
    activate(ctx.id, false);
    await openSession(intent.session_id);
  }
  if (!intent.request_id || !intent.option_id) return;
  const s = ctx.sessions.get(intent.session_id);
  for (let i = 0; i < 300 && !(ctx.link && s?.attachedOn === ctx.link); i++) await new Promise((r) => setTimeout(r, 100));
  const link = ctx.link;
  if (!link) return toast('Not connected: the answer from the notification was not sent.', 'warn');
  try {
    s.answered?.set(intent.request_id, intent.option_id);
    await link.request({
      type: 'permission_response',
      session_id: intent.session_id,
      request_id: intent.request_id,
      option_id: intent.option_id,
    });
    s.persist?.();
    toast(`Answered from the notification: ${intent.option_id}`);
  } catch (e) {
    s.answered?.delete(intent.request_id);
    toast(`The answer from the notification was not taken: ${e.message ?? e}`, 'warn');
  }
}

/** An intent left by the worker for the next page (it opened a window, or could not). */
export async function pendingIntent() {
  if (!globalThis.indexedDB) return null;
  try {
    return await takeIntent();
  } catch {
    return null;
  }
}
