// The service worker's own IndexedDB database, `terminull-sw-push` (the worker cannot
// read the page's localStorage, and keeps apart from the page's `terminull` store):
// - `bridges`: one record per paired bridge with notifications on, keyed by bridge id
//   (the worker opens a push from any of them):
//   `{bridgeId, deviceId, pushKey (base64url, 32 bytes), last (decimal counter)}`,
//   written by the page when notifications are turned on; the worker raises `last`
//   as it opens pushes, and refuses a counter at or below it.
// - `intents`: at most one pending tap (`key "tap"`), `{intent, at}`, written by the
//   worker when no page was open to take it; the next page takes it (within 5 min).

const DB = 'terminull-sw-push';
const BRIDGES = 'bridges';
const INTENTS = 'intents';
const INTENT_TTL_MS = 5 * 60_000;

function promisify(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

function open(idb = globalThis.indexedDB) {
  const req = idb.open(DB, 1);
  req.onupgradeneeded = () => {
    const db = req.result;
    if (!db.objectStoreNames.contains(BRIDGES)) db.createObjectStore(BRIDGES);
    if (!db.objectStoreNames.contains(INTENTS)) db.createObjectStore(INTENTS);
  };
  return promisify(req);
}

async function run(store, mode, fn) {
  const db = await open();
  try {
    const tx = db.transaction(store, mode);
    const result = fn(tx.objectStore(store));
    await new Promise((resolve, reject) => {
      tx.oncomplete = resolve;
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
    return result instanceof IDBRequest ? result.result : result;
  } finally {
    db.close();
  }
}

/**
 * Writes a bridge's record. Rewriting the same device and key keeps the higher `last`
 * (the page's counter may be behind what the worker opened: never lower it, or an
 * opened push could be shown again).
 */
export async function putPushRecord(record) {
  return run(BRIDGES, 'readwrite', (s) => {
    const req = s.get(record.bridgeId);
    req.onsuccess = () => {
      const old = req.result;
      const same = old && old.deviceId === record.deviceId && old.pushKey === record.pushKey;
      const last = same && BigInt(old.last) > BigInt(record.last) ? old.last : record.last;
      s.put({ ...record, last }, record.bridgeId);
    };
  });
}
export const deletePushRecord = (bridgeId) => run(BRIDGES, 'readwrite', (s) => s.delete(bridgeId));
export const pushRecords = () => run(BRIDGES, 'readonly', (s) => s.getAll());

/** Raises a record's last counter (never lowers it). */
export async function raiseLast(bridgeId, last) {
  return run(BRIDGES, 'readwrite', (s) => {
    const req = s.get(bridgeId);
    req.onsuccess = () => {
      const rec = req.result;
      if (rec && BigInt(rec.last) < last) s.put({ ...rec, last: last.toString() }, bridgeId);
    };
  });
}

export const putIntent = (intent) => run(INTENTS, 'readwrite', (s) => s.put({ intent, at: Date.now() }, 'tap'));

/** The pending tap, once (deleted as it is read), if younger than 5 minutes. */
export async function takeIntent() {
  let got = null;
  await run(INTENTS, 'readwrite', (s) => {
    const req = s.get('tap');
    req.onsuccess = () => {
      got = req.result ?? null;
      s.delete('tap');
    };
  });
  return got && Date.now() - got.at < INTENT_TTL_MS ? got.intent : null;
}
