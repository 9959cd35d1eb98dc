// The service worker's push handling (docs/web-client.md, "Notifications"). A Web
// Push message is the relay's `push` frame `{type:"push", device_id, kind, payload}`
// (the browser has already removed the RFC 8291 layer); `payload` is sealed by the
// bridge under this device's push key, which only the page and this worker hold
// (IndexedDB `terminull-sw-push`, see push-db.js). Opened, it shows one notification
// per session (`tag` = session id, replacing the previous one) naming the agent, the
// tool and the command; permission requests get Allow and Deny actions. A tap focuses
// an open page (or opens one) with the intent; the page opens the session at the
// block and sends any answer as a device-signed `permission_response` over its link.

import * as c from '../crypto.js';
import { routeHash } from '../route.js';
import { pushRecords, raiseLast, putIntent } from './push-db.js';

/**
 * Opens a push frame with the record (bridge) whose key opens it. The frame names the
 * device, not the bridge (the relay's `push` frame is `{device_id, kind, payload}`,
 * and one device identity serves every bridge of the page); the sealed payload's
 * associated data binds the bridge id, so only that bridge's record opens it: each
 * record of the device is tried (at most one per paired bridge, 8).
 * `records`: `[{bridgeId, deviceId, pushKey, last}]`. Returns
 * `{notice, bridgeId, counter}`; throws a CryptoError naming why when none opens it
 * (no record for the device, a replayed counter, a wrong key or a tampered payload).
 */
export function openPushFrame(frame, records) {
  if (!frame || frame.type !== 'push' || typeof frame.device_id !== 'string' || typeof frame.kind !== 'string' || typeof frame.payload !== 'string') {
    throw new c.CryptoError('push: not a push frame');
  }
  const mine = records.filter((r) => r && r.deviceId === frame.device_id);
  if (!mine.length) throw new c.CryptoError(`push: no key for device ${frame.device_id}`);
  let last = null;
  for (const r of mine) {
    const opener = new c.Opener(c.fromB64urlN(r.pushKey, 32, 'pushKey'), 'push', BigInt(r.last ?? 0));
    try {
      const notice = JSON.parse(c.fromUtf8(c.openPush(opener, r.bridgeId, r.deviceId, frame)));
      if (!notice || typeof notice.session_id !== 'string' || typeof notice.title !== 'string') {
        throw new c.CryptoError('push: the notice has no session_id or title');
      }
      return { notice, bridgeId: r.bridgeId, counter: opener.last };
    } catch (e) {
      last = e;
    }
  }
  throw last;
}

/** The notification a notice shows: `{title, options}` for `showNotification`. */
export function notificationOf(notice, bridgeId) {
  const lines = [];
  if (notice.tool && notice.body) lines.push(`${notice.tool}: ${notice.body}`);
  else if (notice.body) lines.push(notice.body);
  const actions = [];
  if (notice.kind === 'permission_needed' && notice.request_id) {
    if (notice.allow_option) actions.push({ action: 'allow', title: 'Allow' });
    if (notice.deny_option) actions.push({ action: 'deny', title: 'Deny' });
  }
  return {
    title: notice.title,
    options: {
      body: lines.join('\n'),
      tag: notice.session_id,
      renotify: true,
      requireInteraction: notice.kind === 'permission_needed' || notice.kind === 'question',
      actions,
      data: {
        bridge_id: bridgeId,
        session_id: notice.session_id,
        seq: notice.seq ?? null,
        kind: notice.kind,
        agent: notice.agent ?? null,
        tool: notice.tool ?? null,
        request_id: notice.request_id ?? null,
        allow_option: notice.allow_option ?? null,
        deny_option: notice.deny_option ?? null,
      },
    },
  };
}

/** What a tap (or an action) asks of the page. */
export function intentOf(data, action) {
  const option = action === 'allow' ? data?.allow_option : action === 'deny' ? data?.deny_option : null;
  return {
    bridge_id: data?.bridge_id ?? null,
    session_id: data?.session_id ?? null,
    seq: data?.seq ?? null,
    request_id: option ? data.request_id : null,
    option_id: option ?? null,
  };
}

async function showPush(scope, event) {
  let frame;
  try {
    frame = event.data?.json();
  } catch {
    frame = null;
  }
  let opened;
  try {
    opened = openPushFrame(frame, await pushRecords());
  } catch (e) {
    // Every push must show something (userVisibleOnly); say it could not be read.
    console.warn(`push not opened: ${e.message ?? e}`);
    return scope.registration.showNotification('terminull', { body: 'A notification arrived that this phone could not open.', tag: 'terminull-unreadable' });
  }
  await raiseLast(opened.bridgeId, opened.counter);
  const { title, options } = notificationOf(opened.notice, opened.bridgeId);
  return scope.registration.showNotification(title, options);
}

async function tapped(scope, event) {
  event.notification.close();
  const intent = intentOf(event.notification.data, event.action);
  if (!intent.session_id) return;
  const windows = await scope.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const page = windows.find((w) => w.visibilityState === 'visible') ?? windows[0];
  if (page) {
    page.postMessage({ type: 'terminull-open', intent });
    if ('focus' in page) await page.focus().catch(() => {});
    return;
  }
  // No page open: the next page takes the intent (this one, or one the user opens);
  // the URL routes it to the bridge and session (`#b=…&s=…`, web/src/route.js).
  await putIntent(intent);
  await scope.clients.openWindow(`/?open=1${routeHash(intent.bridge_id, intent.session_id)}`).catch((e) => console.warn(`openWindow: ${e.message ?? e}`));
}

/** Installs the `push` and `notificationclick` handlers on the worker's global `scope`. */
export function installPush(scope) {
  scope.addEventListener('push', (event) => event.waitUntil(showPush(scope, event)));
  scope.addEventListener('notificationclick', (event) => event.waitUntil(tapped(scope, event)));
}
