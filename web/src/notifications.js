// Notifications that reach a closed app (docs/web-client.md, "Notifications"): the
// switch and the per-event switches on the home view; turning it on asks the
// browser's permission, registers the service worker, subscribes with the relay's
// VAPID key, registers the subscription at the relay (signed by this device) and
// writes what the worker needs to open sealed pushes into IndexedDB
// (`terminull-sw-push`). The bridge is told over the link which events this device
// wants (`push_settings`) and which session it shows on a visible screen
// (`presence`), and enforces both. A tap on a notification (or its Allow/Deny)
// arrives here as an intent: open that session, and answer as the card would.

import * as c from './crypto.js';
import { app } from './state.js';
import { h } from './dom.js';
import { toast } from './status.js';
import { openSession } from './session-view.js';
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

const state = { settings: null, presenceSent: null, presenceAt: 0, link: null, socketPushes: 0 };

// Read by the browser tests: pushes that reached the page over its socket.
globalThis.terminullPush = {
  get socketPushes() {
    return state.socketPushes;
  },
};

function settingsKey() {
  return `notify:${app.bridge?.bridgeId}`;
}

/** Whether this page can have notifications at all (a secure context with the APIs). */
export function supported() {
  return Boolean(globalThis.isSecureContext && 'serviceWorker' in navigator && 'PushManager' in globalThis && 'Notification' in globalThis);
}

/** The stored choice: `{enabled, kinds}`. */
async function loadSettings() {
  const saved = app.bridge ? await app.store.get(settingsKey()).catch(() => null) : null;
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
  setInterval(() => reportPresence(false), PRESENCE_CHECK_MS);
  document.addEventListener('visibilitychange', () => reportPresence(false));
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
  await app.store.set(settingsKey(), state.settings).catch(() => {});
  showSettings();
  sendSettings();
}

async function switched() {
  const on = app.ui.notifySwitch.checked;
  app.ui.notifySwitch.disabled = true;
  try {
    if (on) await enable();
    else await disable();
    state.settings.enabled = on;
    app.ui.notifyMsg.textContent = on ? 'This phone is notified when the agent needs you and no screen shows the session.' : '';
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

/** What the relay's HTTP API takes to register or delete a subscription. */
function signedChange(subscription) {
  const deviceId = c.deviceIdOf(app.identity.ed25519Public);
  const bridgeId = app.bridge.bridgeId;
  const { endpoint, keys } = subscription;
  const ts = Math.floor(Date.now() / 1000);
  const sig = c.sign(app.identity, c.pushSubscriptionBytes(bridgeId, deviceId, endpoint, keys.p256dh, keys.auth, ts));
  return JSON.stringify({ bridge_id: bridgeId, device_id: deviceId, subscription: { endpoint, keys }, ts, sig: c.b64(sig) });
}

async function relayCall(method, body) {
  const res = await fetch('/v1/push/subscriptions', { method, headers: { 'content-type': 'application/json' }, body });
  if (!res.ok) throw new Error(`the relay answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
}

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
  await relayCall('POST', signedChange(json));
  await writeRecord();
}

/** Writes the worker's record: ids, the push key and the last counter opened. */
async function writeRecord() {
  const bridge = c.publicKeysFromWire(app.bridge.keys);
  const deviceId = c.deviceIdOf(app.identity.ed25519Public);
  const shared = c.agree(app.identity.x25519Secret, bridge.x25519, 'bridge x25519');
  const pushKey = c.pushKey(shared, app.bridge.bridgeId, deviceId);
  shared.fill(0);
  await putPushRecord({ bridgeId: app.bridge.bridgeId, deviceId, pushKey: c.b64url(pushKey), last: app.pushLast.toString() });
}

async function disable() {
  await deletePushRecord(app.bridge.bridgeId).catch(() => {});
  if (!supported()) return;
  const reg = await navigator.serviceWorker.getRegistration('/');
  const sub = await reg?.pushManager.getSubscription();
  if (!sub) return;
  await relayCall('DELETE', signedChange(sub.toJSON())).catch((e) => console.warn(`unsubscribe at the relay: ${e.message}`));
  await sub.unsubscribe().catch(() => {});
}

/** The kinds the bridge is told: none while switched off. */
function wantedKinds() {
  const s = state.settings;
  return s?.enabled ? s.kinds : [];
}

/** Tells the bridge this device's switches (on every new link and every change). */
function sendSettings() {
  const link = app.link;
  if (!link || !state.settings) return;
  link.request({ type: 'push_settings', kinds: wantedKinds() }).catch((e) => console.warn(`push_settings: ${e.message ?? e}`));
}

/** The sessions this page shows on a visible screen now. */
export function visibleSessions() {
  return document.visibilityState === 'visible' && app.view === 'session' && app.current ? [app.current] : [];
}

/** Reports presence when it changed, on a new link, or every 30 s while a session is visible. */
function reportPresence(force) {
  const link = app.link;
  if (!link) return;
  const visible = visibleSessions();
  const key = JSON.stringify(visible);
  const fresh = state.link !== link;
  const due = visible.length > 0 && Date.now() - state.presenceAt > PRESENCE_REPEAT_MS;
  if (!force && !fresh && key === state.presenceSent && !due) return;
  if (fresh) {
    state.link = link;
    sendSettings();
  }
  state.presenceSent = key;
  state.presenceAt = Date.now();
  link.request({ type: 'presence', visible_session_ids: visible }).catch(() => {
    state.presenceSent = null;
  });
}

/**
 * A push that reached the open page over its socket (the relay sends the socket
 * rather than Web Push while the page is connected). While the page is hidden it is
 * shown as a system notification, exactly as the worker would show it.
 */
export async function onSocketPush(notice) {
  state.socketPushes += 1;
  if (!state.settings?.enabled || document.visibilityState === 'visible' || !supported()) return false;
  if (!state.settings.kinds.includes(notice?.kind)) return false;
  try {
    const reg = await navigator.serviceWorker.getRegistration('/');
    if (!reg) return false;
    const { title, options } = notificationOf(notice, app.bridge.bridgeId);
    await reg.showNotification(title, options);
    return true;
  } catch {
    return false;
  }
}

/** Handles what a tap on a notification asked: open the session, and answer when an action was chosen. */
export async function handleIntent(intent) {
  if (!intent || typeof intent.session_id !== 'string') return;
  if (intent.bridge_id && app.bridge && intent.bridge_id !== app.bridge.bridgeId) return;
  await openSession(intent.session_id);
  if (!intent.request_id || !intent.option_id) return;
  const s = app.sessions.get(intent.session_id);
  for (let i = 0; i < 300 && !(app.link && s?.attachedOn === app.link); i++) await new Promise((r) => setTimeout(r, 100));
  if (!app.link) return toast('Not connected: the answer from the notification was not sent.', 'warn');
  try {
    s.answered?.set(intent.request_id, intent.option_id);
    await app.link.request({
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
